# virtual-kubelet image: a static binary on a minimal, non-root base.
#
#   docker build -t virtual-kubelet --build-arg VERSION=$(git describe --always) .
#   docker build --build-arg BUILD_TAGS=no_mock_provider ...   # leave the mock out
#
# `make image` runs this where a Docker engine exists; `make build-static`
# builds the same binary without one.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
ARG VERSION=v0.1.0-dev
ARG GIT_COMMIT=unknown
ARG BUILD_TAGS=""
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY internal/ internal/
COPY node/ node/
COPY providers/ providers/
RUN CGO_ENABLED=0 go build -trimpath -tags "${BUILD_TAGS}" \
      -ldflags "-s -w -X github.com/vkubelet/virtual-kubelet/internal/version.Version=${VERSION} -X github.com/vkubelet/virtual-kubelet/internal/version.GitCommit=${GIT_COMMIT}" \
      -o /out/ ./cmd/virtual-kubelet ./providers/slurm/cmd/virtual-kubelet-slurm-container

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=v0.1.0-dev
ARG GIT_COMMIT=unknown
LABEL org.opencontainers.image.title="virtual-kubelet" \
      org.opencontainers.image.description="Makes a provider look like a Kubernetes node" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${GIT_COMMIT}" \
      org.opencontainers.image.source="https://github.com/vkubelet/virtual-kubelet" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/ /usr/local/bin/
# The kubelet API port and the metrics port.
EXPOSE 10250 10255
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/virtual-kubelet"]
