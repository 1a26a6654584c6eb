#!/usr/bin/env bash
# `make test`: vet, lint, unit tests, then e2e tests against one real control plane
# that all e2e packages share (started here, stopped on exit). All with -race.
# Unit tests are what a plain `go test ./...` runs; e2e tests are built only
# with -tags e2e. At the end each package's time is printed, slowest first.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
# shellcheck source=hack/controlplane/env.sh
source hack/controlplane/env.sh
# Every go command below, and those the tests run, compile with the control
# plane's flags (VK_GCFLAGS): the static build reuses its packages.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-gcflags=$VK_GCFLAGS"

started=$(date +%s)
# Each step's line says when it began, in seconds since the start.
step() { printf '\n==> %s (at %ds)\n' "$*" $(($(date +%s) - started)); }

# golangci-lint installs (compiles) in the background while the control
# plane builds: a build leaves a core idle while it links each binary.
lint_install_log=$(mktemp /tmp/vk-lint-install.XXXXXX)
hack/lint.sh install >"$lint_install_log" 2>&1 &
lint_install=$!

step "control plane binaries"
VK_CONTROLPLANE_BIN=$(hack/controlplane/build.sh)
# The e2e cluster runs metrics-server (cluster up reads this variable).
VK_METRICS_SERVER_BIN=$(hack/metrics-server/build.sh)
# kwok is make bench's peer, not the tests': its build (its own module graph,
# over two minutes cold) is left to make bench. The bench's smoke test runs a
# kwok pass only when VK_KWOK_DIR is set (VK_KWOK_DIR=$(hack/kwok/build.sh)).
export VK_CONTROLPLANE_BIN VK_METRICS_SERVER_BIN

step "Python plugin packages (apt-get when missing)"
# Its e2e test (TestPythonPlugin) skips without them, except under CI.
plugin/python/install.sh >/dev/null || echo "warning: TestPythonPlugin will skip (or fail, with CI set)"

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './hack/controlplane/build/*'))
if [[ -n $unformatted ]]; then
	echo "gofmt needed on:"; echo "$unformatted"; exit 1
fi

# Every Go build here is -race (vet, golangci-lint's export data, the
# helpers, the tests' own child builds through childproc.BuildFlags): one
# compiled graph, where a build without it would compile every package once
# more (9 minutes on a fresh machine). Only the slurm launcher, small, is
# built without.
step "go vet (with the e2e tests)"
$GO vet -race -tags e2e ./...

step "golangci-lint"
if ! wait "$lint_install"; then
	echo "installing golangci-lint failed:"; cat "$lint_install_log"; exit 1
fi
rm -f "$lint_install_log"
hack/lint.sh

step "build"
# The e2e packages run this one race-enabled binary, the slurm container
# launcher beside it, instead of each building its own
# (internal/testing/childproc.BuildDaemon); the cluster tool goes beside them.
VK_TEST_DAEMON=$(mktemp -d /tmp/vk-test-daemon.XXXXXX)/virtual-kubelet
export VK_TEST_DAEMON
tools=$(dirname "$VK_TEST_DAEMON")
$GO build -race -o "$tools/" ./cmd/virtual-kubelet ./hack/cluster
$GO build -o "$tools/" ./providers/slurm/cmd/virtual-kubelet-slurm-container

# Each `go test` line `ok  <package>  <seconds>s` (or FAIL) goes to times,
# as "<step> <package> <seconds>".
times=$(mktemp /tmp/vk-test-times.XXXXXX)
cluster= # the control plane this script started, stopped on exit
cleanup() {
	if [[ -n $cluster ]]; then "$tools/cluster" down --dir "$cluster" >/dev/null || true; fi
	rm -rf "$(dirname "$VK_TEST_DAEMON")" "$times"
}
trap cleanup EXIT
record() {
	local label=$1 log rc
	shift
	log=$(mktemp /tmp/vk-test-log.XXXXXX)
	set +e
	"$@" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	set -e
	awk -v s="$label" '$1 ~ /^(ok|FAIL)$/ && $3 ~ /^[0-9.]+s$/ {sub(/s$/, "", $3); print s, $2, $3}' "$log" >>"$times"
	rm -f "$log"
	return "$rc"
}
print_times() {
	step "package times, slowest first"
	sort -k3,3 -g -r "$times" | awk '{printf "%8.1fs  %-5s %s\n", $3, $1, $2}'
}

# go vet ran above on every package, the e2e tests' files included: the
# subset go test would run again is left out (-vet=off).
step "unit tests (-race)"
record unit $GO test -race -vet=off -count=1 ./... || { print_times; exit 1; }

# e2e packages are the ones with test files built only with -tags e2e; of
# their tests only those files' run here (the unit tests ran above).
mapfile -t e2e_files < <(git ls-files '*_test.go' | xargs grep -l '^//go:build e2e$')
mapfile -t e2e < <(printf '%s\n' "${e2e_files[@]}" | xargs -n1 dirname | sort -u | sed 's|^|./|')
# go test starts packages in the order given, E2E_PARALLEL at a time: the
# longest start first, so that none of them begins near the end and runs on
# alone (longest-first; the list is their order in a cold run, slowest
# first; packages not in it follow in name order).
slowest_first=(test/daemon/kubernetes test/daemon/faults test/daemon/pods providers/slurm/e2e
	providers/slurm/e2e/tenants node hack/bench providers/slurm/e2e/faults test/daemon/replicas test/daemon/kubectl
	test/e2e test/daemon/deploy test/daemon/stages test/daemon/plugins test/daemon/managed test/daemon/usage
	test/daemon/dra providers/slurm test/daemon/conformance hack/port-provider test/daemon/volumes
	test/daemon/observability node/api)
mapfile -t e2e < <(
	for p in "${slowest_first[@]}"; do printf '%s\n' "${e2e[@]}" | grep -x "./$p" || true; done
	printf '%s\n' "${e2e[@]}" | grep -vxF -f <(printf './%s\n' "${slowest_first[@]}")
)
e2e_tests=$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(.*/\1/p' "${e2e_files[@]}" | grep -vx TestMain | sort -u | paste -sd'|')

step "e2e tests (-race -tags e2e) in ${#e2e[@]} packages"
cluster=$(mktemp -d /tmp/vk-test-cluster.XXXXXX)
export VK_TEST_CLUSTER=$cluster
"$tools/cluster" up --dir "$VK_TEST_CLUSTER" --bin-dir "$VK_CONTROLPLANE_BIN"
# go test runs E2E_PARALLEL packages at a time (default 4, on the 2-core
# machines this runs on): they share the cluster, each test in namespaces
# and nodes of its own. An e2e package's processes mostly wait on the API
# server, Slurm and the daemons' timers; with three at a time the two cores
# were 42-85 % busy through this step, minute by minute.
record e2e $GO test -race -tags e2e -vet=off -count=1 -p "${E2E_PARALLEL:-4}" -timeout 30m -run "^($e2e_tests)\$" "${e2e[@]}" || { print_times; exit 1; }

print_times
step "all passed in $(($(date +%s) - started))s"
