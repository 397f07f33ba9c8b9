#!/bin/sh
# Builds kube-apiserver from the Go module proxy (wrapper module in ./apiserver) and
# caches the binary outside the clone, keyed on the wrapper's go.sum and the Go
# version, so that only the first run on a machine pays the ~10 CPU-minute build.
# Prints the binary's path on stdout. Usage: build-apiserver.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
key=$( (cat "$here/apiserver/go.sum" "$here/apiserver/go.mod" "$here/apiserver/main.go"; go env GOVERSION) | sha256sum | cut -c1-16)
dir="${EDGE_KUBE_E2E_CACHE:-$HOME/.cache/edge-kube-e2e}/$key"
bin="$dir/kube-apiserver"
if [ ! -x "$bin" ]; then
	mkdir -p "$dir"
	echo "building kube-apiserver into $bin (cold: ~10 CPU-minutes)" >&2
	# nice: the build machine is shared; -trimpath/-s -w keep the binary at ~100 MiB.
	(cd "$here/apiserver" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w" -o "$bin.tmp" .)
	mv "$bin.tmp" "$bin"
fi
echo "$bin"
