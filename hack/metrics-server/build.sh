#!/usr/bin/env bash
# Builds metrics-server from source at the release pinned in
# hack/controlplane/env.sh, through the Go module proxy, and caches the binary
# outside the repository beside the control plane, keyed by version and by this
# script. Prints the binary's path on stdout.
#
# The release's own go.mod and go.sum pin its dependencies (it has no replace
# directives), so `go install module@version` builds it as released: no
# wrapper module is needed. A cold build takes a few minutes on two cores.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/controlplane/env.sh
source "$here/../controlplane/env.sh"

bin=$(vk_metrics_server_bin)
if [[ -x $bin ]]; then
	echo "$bin"
	exit 0
fi

echo "building metrics-server $VK_METRICS_SERVER_VERSION into $(dirname "$bin") (cold build: a few minutes on 2 cores)" >&2
start=$(date +%s)
tmp="$(dirname "$bin").tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

# The version metrics-server --version and its /version report, stamped as
# the release's Makefile does.
pkg=k8s.io/client-go/pkg/version
ldflags="-s -w -X $pkg.gitVersion=$VK_METRICS_SERVER_VERSION -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
# Outside any module, so the project's go.mod plays no part.
cd "$tmp"
CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath -ldflags "$ldflags" \
	"sigs.k8s.io/metrics-server/cmd/metrics-server@$VK_METRICS_SERVER_VERSION"

rm -rf "$(dirname "$bin")"
mv "$tmp" "$(dirname "$bin")"
trap - EXIT
echo "built metrics-server in $(($(date +%s) - start))s" >&2
echo "$bin"
