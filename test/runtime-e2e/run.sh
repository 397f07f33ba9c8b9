#!/bin/sh
# Runs the runtime-e2e tier against the image EDGE_RUNTIME_IMAGE (default
# localhost/edge:dev, which `make image` builds). Extra arguments go to
# `go test`. `make runtime-e2e` installs podman and runc, builds the image
# and calls this.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${EDGE_RUNTIME_IMAGE:=localhost/edge:dev}"
export EDGE_RUNTIME_IMAGE
cd "$here/../.."
exec go test -race -count=1 -v -timeout 15m "$@" ./test/runtime-e2e/
