# syntax=docker/dockerfile:1

# hyperplane's image: a static binary on distroless, as a non-root user.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t hyperplane .
#   docker run -v $PWD/config.yaml:/etc/hyperplane/config.yaml:ro -p 8080:8080 hyperplane
#
# .ci/run builds the binary with the same command, and deploy/ tests that
# the two agree.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/hyperplane ./cmd/hyperplane

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hyperplane /usr/local/bin/hyperplane
USER nonroot:nonroot
# /metrics, /healthz and /readyz (http.addr).
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/hyperplane"]
CMD ["run", "--config", "/etc/hyperplane/config.yaml"]
