#!/usr/bin/env bash
# Generates the Python plugin's stubs into OUT (default plugin/python/gen,
# not committed): the contract (proto/provider/v1alpha1/provider.proto)
# and the Kubernetes types a pod travels as (k8s.io/api core/v1 and the
# apimachinery files it imports, from the Go module cache at the versions
# go.mod names). Uses grpc_tools.protoc from python3-grpc-tools.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$here/gen}
python=${PYTHON:-/usr/bin/python3}
cd "$root"
api=$(go list -m -f '{{.Dir}}' k8s.io/api)
machinery=$(go list -m -f '{{.Dir}}' k8s.io/apimachinery)
[[ -n $api && -n $machinery ]] || { echo "gen.sh: go list found no module dir for k8s.io/api or k8s.io/apimachinery (go mod download)" >&2; exit 1; }
# Python imports a generated file by its path, and "k8s.io" is no Python
# package name: the Kubernetes files are staged under k8s_io/ with their
# imports renamed to match. The protobuf package names stay as they are.
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
files=()
stage_file() { # SRC DEST
	mkdir -p "$stage/$(dirname "$2")"
	sed 's#^import "k8s.io/#import "k8s_io/#' "$1" >"$stage/$2"
	files+=("$2")
}
stage_file "$api/core/v1/generated.proto" k8s_io/api/core/v1/generated.proto
for p in pkg/api/resource pkg/apis/meta/v1 pkg/runtime pkg/runtime/schema pkg/util/intstr; do
	stage_file "$machinery/$p/generated.proto" "k8s_io/apimachinery/$p/generated.proto"
done
mkdir -p "$out"
"$python" -m grpc_tools.protoc -I "$stage" --python_out="$out" "${files[@]}"
"$python" -m grpc_tools.protoc -I proto --python_out="$out" --grpc_python_out="$out" provider/v1alpha1/provider.proto
