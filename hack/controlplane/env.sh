# Shared settings for the control-plane scripts: versions, cache location.
# Source it; it defines variables and functions only.

VK_K8S_VERSION=v1.36.3
VK_ETCD_VERSION=v3.6.16

# The compiler's flags for every build of make test, the control plane's
# included: no DWARF. Nothing reads it (-w drops it from the binaries; stack
# traces and race reports use the symbol table), and generating it is about
# a fifth of the compiler's time. Builds share compiled packages only when
# their flags match, so the scripts and make test pass the same value.
VK_GCFLAGS=all=-dwarf=false

# The cache lives outside the repository so clean clones reuse it.
VK_CACHE_DIR=${VK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/virtual-kubelet}

# vk_controlplane_bin prints the cache directory for the current wrapper
# module: any change to its go.mod, go.sum or sources gives a new key.
vk_controlplane_bin() {
	local dir sum
	dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/build
	sum=$(cd "$dir" && cat go.mod go.sum etcd/main.go ../build.sh | sha256sum | cut -c1-12)
	echo "$VK_CACHE_DIR/controlplane/k8s-$VK_K8S_VERSION-etcd-$VK_ETCD_VERSION-$sum/bin"
}

# metrics-server, built by hack/metrics-server/build.sh and run by
# `cluster up` so that `kubectl top` and HorizontalPodAutoscalers work.
VK_METRICS_SERVER_VERSION=v0.9.0

# vk_metrics_server_bin prints where the metrics-server binary is cached: any
# change to the version, to its build script or to its wrapper module gives a
# new key.
vk_metrics_server_bin() {
	local dir sum
	dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../metrics-server
	sum=$(cd "$dir" && cat build.sh build/go.mod build/go.sum build/tools.go | sha256sum | cut -c1-12)
	echo "$VK_CACHE_DIR/metrics-server/$VK_METRICS_SERVER_VERSION-$sum/metrics-server"
}

# kwok, the simulator `make bench` measures beside the daemon, built by
# hack/kwok/build.sh.
VK_KWOK_VERSION=v0.8.0

# vk_kwok_dir prints where kwok is cached (bin/kwok and stages.yaml): any
# change to the version or to its build script gives a new key.
vk_kwok_dir() {
	local script sum
	script=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../kwok/build.sh
	sum=$(sha256sum <"$script" | cut -c1-12)
	echo "$VK_CACHE_DIR/kwok/$VK_KWOK_VERSION-$sum"
}
