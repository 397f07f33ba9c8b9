#!/bin/sh
# Lays out the image's whole filesystem in the directory $1 (created, must
# not exist yet): the static edge binary at /edge, the CA certificates,
# a passwd and group entry for uid 65532, and a world-writable /tmp where
# the provider plugins put their sockets when nothing is mounted there.
# The Dockerfile's build stage and `make image` (deploy/image/build.sh)
# both run it, and both copy the result onto an empty base: what is built
# offline here is what the Dockerfile ships. Run from the module root;
# VERSION names the build (default dev).
set -eu
root=$1
if [ -e "$root" ]; then
	echo "rootfs.sh: $root exists" >&2
	exit 1
fi
mkdir -p "$root/etc/ssl/certs" "$root/tmp"
# Static: the image has no C library. -trimpath and a stripped binary, as
# any release build.
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION:-dev}" -o "$root/edge" ./cmd/edge
# edge dials Redis, the Kubernetes API and ACME over TLS.
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
# Kubernetes' runAsUser gives a uid; the runtime takes its group from the
# image's passwd (Deployment: runAsUser 65532, no runAsGroup).
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
chmod 0644 "$root/etc/passwd" "$root/etc/group" "$root/etc/ssl/certs/ca-certificates.crt"
chmod 1777 "$root/tmp"
