#!/usr/bin/env bash
# `make fuzz`: every fuzz target (func FuzzXxx in a _test.go file), one after
# another, each for FUZZTIME with one worker: the machine is shared. Fuzz
# targets are unit tests: no -tags e2e, so no control plane. FUZZ_PKGS
# limits the run to some packages (default ./...), FUZZ_RUN to the targets
# matching a regular expression, FUZZMINIMIZETIME the time spent minimizing
# each new input. A crasher is written to the package's
# testdata/fuzz/<FuzzName>/, where `go test` runs it from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-60s}
FUZZ_PKGS=${FUZZ_PKGS:-./...}
FUZZ_RUN=${FUZZ_RUN:-.}
# Minimizing each new input may take go's default of 60s, longer than a
# short FUZZTIME; a few seconds keep most of the time for fuzzing.
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-5s}

# The packages whose tests mention a fuzz target, then each one's targets as
# go test lists them.
mapfile -t pkgs < <($GO list -f '{{.ImportPath}} {{.Dir}}' $FUZZ_PKGS |
	while read -r pkg dir; do
		if grep -qs '^func Fuzz' "$dir"/*_test.go; then echo "$pkg"; fi
	done)
targets=()
for pkg in "${pkgs[@]}"; do
	while read -r name; do
		[[ $name == Fuzz* && $name =~ $FUZZ_RUN ]] && targets+=("$pkg $name")
	done < <($GO test -list '^Fuzz' "$pkg")
done
echo "${#targets[@]} fuzz targets, $FUZZTIME each"

failed=()
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	printf '\n==> %s %s\n' "$pkg" "$name"
	if ! $GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" -parallel 1 "$pkg"; then
		failed+=("$pkg $name")
	fi
done
if ((${#failed[@]} > 0)); then
	printf '\nfailed:\n'; printf '  %s\n' "${failed[@]}"
	exit 1
fi
