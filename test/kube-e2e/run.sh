#!/bin/sh
# Runs the kube-e2e tier: builds (or reuses the cached) kube-apiserver, then
# the tests against it and Debian's etcd. Extra arguments go to `go test`.
# `make kube-e2e` calls this; .ci/run too.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
EDGE_KUBE_APISERVER=$("$here/build-apiserver.sh")
export EDGE_KUBE_APISERVER
cd "$here/../.."
exec go test -race -count=1 "$@" ./test/kube-e2e/
