#!/bin/sh
# Runs the node-e2e tier: builds (or reuses the cached) Kubernetes
# binaries and CoreDNS (build.sh), the agent and pause images and the
# archives of every image the node imports (images.sh, from
# EDGE_NODE_E2E_IMAGE: default localhost/edge:dev, which `make image`
# builds), then the test, as root. Extra arguments go to `go test`.
# `make node-e2e` installs what it needs and calls this.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${EDGE_NODE_E2E_IMAGE:=localhost/edge:dev}"
EDGE_NODE_E2E_BIN=$("$here/build.sh")
images=$(mktemp -d "${TMPDIR:-/tmp}/edge-node-images.XXXXXX")
trap 'rm -rf "$images"' EXIT
"$here/images.sh" "$EDGE_NODE_E2E_IMAGE" "$images"
EDGE_NODE_E2E_IMAGES=$images
export EDGE_NODE_E2E_BIN EDGE_NODE_E2E_IMAGES
cd "$here/../.."
go test -count=1 -v -timeout 45m "$@" ./test/node-e2e/
