# The image deploy/ runs (ghcr.io/edge-voice/edge): one static binary, which
# also serves the built-in provider plugins (`edge plugin <name>`), on an
# empty base (no shell), as the non-root user deploy/base runs it as.
#
#   docker build -t ghcr.io/edge-voice/edge:$(git describe --always) --build-arg VERSION=$(git describe --always) .
#
# deploy/image/rootfs.sh lays out the whole filesystem; `make image` runs it
# and the same runtime stage (deploy/image/Containerfile) with no network,
# and test/runtime-e2e runs that image under runc as deploy/ has it.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN VERSION=${VERSION} deploy/image/rootfs.sh /out/rootfs

FROM scratch
COPY --from=build /out/rootfs/ /
USER 65532:65532
EXPOSE 8080 8082 9090
ENTRYPOINT ["/edge"]
