#!/usr/bin/env bash
# `make lint`: golangci-lint with the linters .golangci.yml names. The version
# is pinned here and installed once with `go install` into the cache outside
# the repository (a cold install takes about three minutes on two cores).
# `hack/lint.sh install` only installs it.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
version=v2.15.0
cache=${VK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/virtual-kubelet}
bin=$cache/tools/golangci-lint-$version
if [[ ! -x $bin/golangci-lint ]]; then
	mkdir -p "$bin"
	# One install at a time per version, as for the control plane.
	exec 9>"$bin.lock"
	flock 9
	[[ -x $bin/golangci-lint ]] || GOBIN=$bin $GO install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$version"
fi
if [[ ${1:-} == install ]]; then
	exit 0
fi
# golangci-lint type-checks against compiled export data (go list -export):
# with -race it reuses what vet and the tests compile in make test, where
# without it a fresh machine compiles the whole graph once more (minutes).
GOFLAGS="-race ${GOFLAGS:-}" exec "$bin/golangci-lint" run ./...
