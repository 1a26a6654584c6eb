#!/usr/bin/env bash
# `make test`: vet, unit tests, then e2e tests against one real control plane
# that all e2e packages share (started here, stopped on exit). All with -race.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
BIN=${BIN:-$PWD/bin}

step() { printf '\n==> %s\n' "$*"; }
started=$(date +%s)

step "control plane binaries"
VK_CONTROLPLANE_BIN=$(hack/controlplane/build.sh)
# The e2e cluster runs metrics-server (cluster up reads this variable).
VK_METRICS_SERVER_BIN=$(hack/metrics-server/build.sh)
# The bench's smoke test runs kwok beside the daemon.
VK_KWOK_DIR=$(hack/kwok/build.sh)
export VK_CONTROLPLANE_BIN VK_METRICS_SERVER_BIN VK_KWOK_DIR

step "Python plugin packages (apt-get when missing)"
# Its e2e test (TestPythonPlugin) skips without them, except under CI.
plugin/python/install.sh >/dev/null || echo "warning: TestPythonPlugin will skip (or fail, with CI set)"

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './hack/controlplane/build/*'))
if [[ -n $unformatted ]]; then
	echo "gofmt needed on:"; echo "$unformatted"; exit 1
fi

step "go vet"
$GO vet ./...

step "build"
$GO build -o "$BIN/" ./cmd/virtual-kubelet ./providers/slurm/cmd/virtual-kubelet-slurm-container ./hack/cluster

step "unit tests (-race -short)"
$GO test -race -short -count=1 ./...

# e2e packages are the ones whose tests use the cluster harness.
mapfile -t e2e < <($GO list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... |
	awk '/internal\/testing\/testcluster( |$)/ {print $1}')

step "e2e tests (-race) in ${#e2e[@]} packages"
VK_TEST_CLUSTER=$(mktemp -d /tmp/vk-test-cluster.XXXXXX)
export VK_TEST_CLUSTER
trap '"$BIN/cluster" down --dir "$VK_TEST_CLUSTER" >/dev/null || true' EXIT
"$BIN/cluster" up --dir "$VK_TEST_CLUSTER" --bin-dir "$VK_CONTROLPLANE_BIN"
$GO test -race -count=1 -timeout 30m "${e2e[@]}"

step "all passed in $(($(date +%s) - started))s"
