#!/usr/bin/env bash
# Builds kwok at the release pinned in hack/controlplane/env.sh through the Go
# module proxy, and caches it outside the repository with the stages the bench
# runs it with. Prints the cache directory on stdout: bin/kwok and stages.yaml.
#
# stages.yaml is kwok's own "fast" stages as the release ships them (node
# initialize, heartbeat with lease; pod ready, complete, delete): the set
# kwokctl gives a cluster by default, read from the release's module source.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/controlplane/env.sh
source "$here/../controlplane/env.sh"

dir=$(vk_kwok_dir)
if [[ -x $dir/bin/kwok && -s $dir/stages.yaml ]]; then
	echo "$dir"
	exit 0
fi

echo "building kwok $VK_KWOK_VERSION into $dir (cold build: a few minutes on 2 cores)" >&2
start=$(date +%s)
tmp="$dir.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp/bin"
trap 'rm -rf "$tmp"' EXIT
# Outside any module, so the project's go.mod plays no part; the release's
# own go.mod pins its dependencies.
cd "$tmp"
CGO_ENABLED=0 GOBIN="$tmp/bin" go install -trimpath "sigs.k8s.io/kwok/cmd/kwok@$VK_KWOK_VERSION"

src=$(go mod download -json "sigs.k8s.io/kwok@$VK_KWOK_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -d $src ]] || { echo "kwok $VK_KWOK_VERSION: module source not found" >&2; exit 1; }
for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
	pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
	echo "---"
	cat "$src/kustomize/stage/$f"
done >"$tmp/stages.yaml"

rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
mv "$tmp" "$dir"
trap - EXIT
echo "built kwok in $(($(date +%s) - start))s" >&2
echo "$dir"
