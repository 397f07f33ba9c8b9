# The image deploy/ runs (ghcr.io/edge-voice/edge): one static binary, which
# also serves the built-in provider plugins (`edge plugin <name>`), on a
# base with no shell, as the non-root user deploy/base runs it as.
#
#   docker build -t ghcr.io/edge-voice/edge:$(git describe --always) .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/edge ./cmd/edge

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/edge /edge
USER 65532:65532
EXPOSE 8080 8082 9090
ENTRYPOINT ["/edge"]
