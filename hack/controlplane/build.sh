#!/usr/bin/env bash
# Builds the test control plane (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, kubectl) from source through the Go module proxy and
# caches the binaries outside the repository, keyed by version and by the
# wrapper module's contents. Prints the bin directory on stdout.
#
# A cold build takes about ten minutes on two cores; a warm one is a stat.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/controlplane/env.sh
source "$here/env.sh"

bin=$(vk_controlplane_bin)
want=(etcd kube-apiserver kube-scheduler kube-controller-manager kubectl)

# Prints the bin directory and exits if every binary is there.
exit_if_built() {
	for b in "${want[@]}"; do [[ -x "$bin/$b" ]] || return 0; done
	echo "$bin"
	exit 0
}
exit_if_built

# One build at a time per cache entry: a second caller (another worktree's
# `make test`, a parallel CI step) waits for the first and then finds the
# binaries, instead of compiling Kubernetes twice on the same cores.
mkdir -p "$(dirname "$bin")"
exec 9>"$bin.lock"
if ! flock -n 9; then
	echo "waiting for another build of $bin" >&2
	flock 9
	exit_if_built
fi

echo "building control plane $VK_K8S_VERSION + etcd $VK_ETCD_VERSION into $bin (cold build: ~10 min on 2 cores)" >&2
start=$(date +%s)
tmp="$bin.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

# The version stamps kubectl version and /version report; the apiserver's
# compatibility version comes from the source itself.
pkg=k8s.io/component-base/version
cgo=k8s.io/client-go/pkg/version
minor=${VK_K8S_VERSION#v1.}
minor=${minor%%.*}
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w"
for p in $pkg $cgo; do
	ldflags+=" -X $p.gitVersion=$VK_K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
	ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=$date"
done

cd "$here/build"
# No -trimpath: with it a package is compiled under the version its module's
# requirement names, not the one a replace pins, and hack/metrics-server (which
# pins this module's versions by replace) could not reuse these packages.
export CGO_ENABLED=0 GOFLAGS=-mod=mod
go build -gcflags="$VK_GCFLAGS" -ldflags "$ldflags" -o "$tmp/" \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler \
	k8s.io/kubernetes/cmd/kubectl
go build -gcflags="$VK_GCFLAGS" -ldflags "-s -w" -o "$tmp/etcd" ./etcd

rm -rf "$bin"
mv "$tmp" "$bin"
trap - EXIT
echo "built control plane in $(($(date +%s) - start))s" >&2
echo "$bin"
