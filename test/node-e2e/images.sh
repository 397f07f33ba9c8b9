#!/bin/sh
# Builds the images test/node-e2e's node runs besides edge's, with no
# network, as deploy/image/build.sh builds edge's: a static binary on an
# empty base. localhost/edge-node-e2e/agent:dev is the fake voice agent
# (./agent), localhost/edge-node-e2e/pause:dev the pod sandbox (./pause).
# Then writes each image the test imports into its containerd (those two
# and edge's, $1, with a second tag $1-next for the rolling update) as an
# archive in $2. Usage: images.sh EDGE_IMAGE OUTDIR
set -eu
edge=$1
out=$2
cd "$(dirname "$0")/../.."
mkdir -p "$out"
ctx=$(mktemp -d "${TMPDIR:-/tmp}/edge-node-images.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
for name in agent pause; do
	mkdir -p "$ctx/$name/rootfs"
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$ctx/$name/rootfs/$name" "./test/node-e2e/$name"
	printf 'FROM scratch\nCOPY rootfs/ /\nUSER 65532:65532\nENTRYPOINT ["/%s"]\n' "$name" >"$ctx/$name/Containerfile"
	old=$(podman image inspect --format '{{.Id}}' "localhost/edge-node-e2e/$name:dev" 2>/dev/null || true)
	new=$(podman build -q --network=none --pull=never --layers=false \
		-f "$ctx/$name/Containerfile" -t "localhost/edge-node-e2e/$name:dev" "$ctx/$name")
	# The previous build, now untagged, is ours to remove.
	if [ -n "$old" ] && [ "$old" != "$new" ]; then
		podman rmi "$old" >/dev/null 2>&1 || true
	fi
	podman save -q --format docker-archive -o "$out/$name.tar.tmp" "localhost/edge-node-e2e/$name:dev"
	mv "$out/$name.tar.tmp" "$out/$name.tar"
done
podman tag "$edge" "$edge-next"
podman save -q --format docker-archive -m -o "$out/edge.tar.tmp" "$edge" "$edge-next"
mv "$out/edge.tar.tmp" "$out/edge.tar"
