#!/usr/bin/env bash
# Regenerates the plugin contract's Go code (plugin/providerv1alpha1) from
# proto/ with pinned generators, installed into bin/ by `go install`; protoc
# itself comes from apt (protobuf-compiler).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-$PWD/bin}
PROTOC_GEN_GO=v1.36.12
PROTOC_GEN_GO_GRPC=v1.6.1
command -v protoc >/dev/null || { echo "protoc not found: apt-get install -y protobuf-compiler" >&2; exit 1; }
GOBIN=$BIN go install google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO
GOBIN=$BIN go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
PATH=$BIN:$PATH protoc -I proto \
  --go_out="$out" --go_opt=paths=source_relative \
  --go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
  proto/provider/v1alpha1/provider.proto
mkdir -p plugin/providerv1alpha1
cp "$out"/provider/v1alpha1/*.go plugin/providerv1alpha1/
