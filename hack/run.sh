#!/usr/bin/env bash
# `make run`: with no KUBECONFIG, bring up the local control plane and run the
# mock node vk0 in a node host of it (so the apiserver can reach its kubelet
# API); with KUBECONFIG, run vk0 against that cluster from here.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-$PWD/bin}
CLUSTER_DIR=${CLUSTER_DIR:-/tmp/virtual-kubelet/local}
NODE=${NODE:-vk0}

if [[ -n ${KUBECONFIG:-} ]]; then
	echo "using the cluster in KUBECONFIG=$KUBECONFIG"
	exec "$BIN/virtual-kubelet" --provider mock --nodename "$NODE"
fi

bin=$(hack/controlplane/build.sh)
"$BIN/cluster" up --dir "$CLUSTER_DIR" --bin-dir "$bin"
cat <<EOT

In another terminal:
  export KUBECONFIG=$CLUSTER_DIR/admin.kubeconfig PATH=$bin:\$PATH
  kubectl get nodes
  kubectl apply -f hack/examples/pod.yaml
Stop with Ctrl-C; \`make cluster-down\` removes the control plane.

EOT
exec "$BIN/cluster" exec --dir "$CLUSTER_DIR" "$NODE" -- "$BIN/virtual-kubelet" --provider mock --nodename "$NODE"
