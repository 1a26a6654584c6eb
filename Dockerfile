# Placeholder until the deploy issue: builds the static binary.
FROM golang:1.26 AS build
WORKDIR /src
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /virtual-kubelet ./cmd/virtual-kubelet

FROM gcr.io/distroless/static:nonroot
COPY --from=build /virtual-kubelet /virtual-kubelet
ENTRYPOINT ["/virtual-kubelet"]
