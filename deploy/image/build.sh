#!/bin/sh
# Builds edge's image with no network and no registry: the binary and the
# rest of the filesystem from this checkout (rootfs.sh), copied onto an
# empty base by podman (Containerfile, the Dockerfile's runtime stage).
# Usage: deploy/image/build.sh [tag]   (default localhost/edge:dev);
# VERSION names the build. `make image` runs it.
set -eu
tag=${1:-localhost/edge:dev}
cd "$(dirname "$0")/../.."
ctx=$(mktemp -d "${TMPDIR:-/tmp}/edge-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
deploy/image/rootfs.sh "$ctx/rootfs"
podman build --network=none --pull=never --layers=false \
	-f deploy/image/Containerfile -t "$tag" "$ctx"
