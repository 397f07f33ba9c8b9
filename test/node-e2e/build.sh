#!/bin/sh
# Builds what test/node-e2e runs besides edge: kubelet, kube-controller-
# manager, kube-scheduler, kube-proxy and kubectl (wrapper mains in ./kube,
# the k8s.io/kubernetes version of test/kube-e2e/apiserver, in one `go
# build` so they share the work) and a minimal CoreDNS (./coredns), from
# the Go module proxy. Each set is cached outside the clone, beside the
# kube-apiserver test/kube-e2e/build-apiserver.sh caches, keyed on its
# module files and the Go version: only the first run on a machine pays
# the build. Prints the directory holding all of them, kube-apiserver
# included, on stdout. Usage: build.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cache="${EDGE_KUBE_E2E_CACHE:-$HOME/.cache/edge-kube-e2e}"
apiserver=$("$here/../kube-e2e/build-apiserver.sh")

# key DIR: a hash of a wrapper module's files and the Go version.
key() {
	(cd "$1" && find . -name '*.go' -o -name go.mod -o -name go.sum | LC_ALL=C sort | xargs cat; go env GOVERSION) | sha256sum | cut -c1-16
}

kube="$cache/node-$(key "$here/kube")"
if [ ! -x "$kube/kubectl" ]; then
	mkdir -p "$kube.tmp"
	echo "building kubelet, kube-controller-manager, kube-scheduler, kube-proxy and kubectl into $kube (cold: ~15 CPU-minutes)" >&2
	# nice: the build machine is shared; -trimpath/-s -w as the apiserver.
	(cd "$here/kube" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w" -o "$kube.tmp/" \
		./kubelet ./kube-controller-manager ./kube-scheduler ./kube-proxy ./kubectl)
	rm -rf "$kube"
	mv "$kube.tmp" "$kube"
fi

dns="$cache/coredns-$(key "$here/coredns")"
if [ ! -x "$dns/coredns" ]; then
	mkdir -p "$dns"
	echo "building coredns into $dns (cold: ~3 CPU-minutes)" >&2
	(cd "$here/coredns" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w" -o "$dns/coredns.tmp" .)
	mv "$dns/coredns.tmp" "$dns/coredns"
fi

# One directory of every binary the node runs.
bin="$cache/node-bin-$(echo "$apiserver $kube $dns" | sha256sum | cut -c1-16)"
mkdir -p "$bin"
for f in "$apiserver" "$kube"/* "$dns/coredns"; do
	ln -sf "$f" "$bin/$(basename "$f")"
done
echo "$bin"
