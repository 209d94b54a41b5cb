# syntax=docker/dockerfile:1
#
# Switchboard in a container: a static binary on distroless, running as a
# non-root user, with the SQLite database on the /data volume.
#
#   make docker                       # or: docker build --build-arg VERSION=v0.1.0 -t switchboard .
#   docker run --rm -p 127.0.0.1:8080:8080 -v switchboard-data:/data \
#     -e GATEWAY_TOKEN=$(openssl rand -hex 32) -e OPENAI_API_KEY switchboard
#
# docs/operating.md has compose, systemd, upgrades, backups and the doctor.

# The base images, by tag. Pin them by digest where you build for
# production (a tag moves; a digest is one image):
#   docker build --build-arg GO_IMAGE=golang:1.26@sha256:… \
#     --build-arg RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot@sha256:… .
# (docker buildx imagetools inspect <image> prints a tag's digest.)
ARG GO_IMAGE=golang:1.26
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${GO_IMAGE} AS build
WORKDIR /src
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=devel
# CGO_ENABLED=0: modernc.org/sqlite is pure Go, so the binary is static and
# needs no libc (make static builds the same).
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/gateway ./cmd/gateway
# The volume's mount point, owned by the image's user, so a new named
# volume starts out writable by the gateway.
RUN mkdir -p /out/data

FROM ${RUNTIME_IMAGE}
COPY --from=build /out/gateway /usr/local/bin/gateway
# The configuration's relative paths (guides) are its folder's: mount your
# own config.yaml or guides/ over them (read-only is fine).
WORKDIR /etc/switchboard
COPY deploy/container.yaml /etc/switchboard/config.yaml
COPY guides/*.md /etc/switchboard/guides/
COPY --from=build --chown=65532:65532 /out/data /data
VOLUME /data
USER 65532:65532
# /ws, the widget and /healthz. Metrics are on 9090 for other containers
# (metrics.addr); publish it only if you mean to.
EXPOSE 8080
# No curl in distroless: the binary asks its own /healthz, at the
# config's http.addr over loopback.
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
    CMD ["/usr/local/bin/gateway", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/gateway"]
CMD ["--config", "/etc/switchboard/config.yaml"]
