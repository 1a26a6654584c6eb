#!/usr/bin/env bash
# Builds metrics-server from source at the release pinned in
# hack/controlplane/env.sh, through the Go module proxy, and caches the binary
# outside the repository beside the control plane, keyed by version, by this
# script and by the wrapper module. Prints the binary's path on stdout.
#
# The wrapper module (build/) pins the dependencies metrics-server shares with
# the control plane to the control plane's versions, and the flags match
# hack/controlplane/build.sh's (no -trimpath, which would key the pinned
# modules' packages by the versions required instead), so after the control
# plane a cold build compiles little more than metrics-server's own packages.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/controlplane/env.sh
source "$here/../controlplane/env.sh"

bin=$(vk_metrics_server_bin)
if [[ -x $bin ]]; then
	echo "$bin"
	exit 0
fi

echo "building metrics-server $VK_METRICS_SERVER_VERSION into $(dirname "$bin") (cold: a few minutes; after the control plane, about a minute)" >&2
start=$(date +%s)
tmp="$(dirname "$bin").tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

# The version metrics-server --version and its /version report, stamped as
# the release's Makefile does.
pkg=k8s.io/client-go/pkg/version
ldflags="-s -w -X $pkg.gitVersion=$VK_METRICS_SERVER_VERSION -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
cd "$here/build"
if ! grep -q "sigs.k8s.io/metrics-server $VK_METRICS_SERVER_VERSION\$" go.mod; then
	echo "hack/metrics-server/build/go.mod does not require metrics-server $VK_METRICS_SERVER_VERSION (env.sh's)" >&2
	exit 1
fi
CGO_ENABLED=0 GOFLAGS=-mod=mod go build -gcflags="$VK_GCFLAGS" -ldflags "$ldflags" -o "$tmp/" sigs.k8s.io/metrics-server/cmd/metrics-server

rm -rf "$(dirname "$bin")"
mv "$tmp" "$(dirname "$bin")"
trap - EXIT
echo "built metrics-server in $(($(date +%s) - start))s" >&2
echo "$bin"
