#!/usr/bin/env bash
# `make run`: with no KUBECONFIG, bring up the local control plane (with
# metrics-server unless METRICS_SERVER=0) and run the mock node vk0 in a node
# host of it (so the apiserver and metrics-server can reach its kubelet API);
# with KUBECONFIG, run vk0 against that cluster from here.
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
metrics_server=()
if [[ ${METRICS_SERVER:-1} != 0 ]]; then
	metrics_server=(--metrics-server "$(hack/metrics-server/build.sh)")
fi
"$BIN/cluster" up --dir "$CLUSTER_DIR" --bin-dir "$bin" "${metrics_server[@]}"
cat <<EOT

In another terminal:
  export KUBECONFIG=$CLUSTER_DIR/admin.kubeconfig PATH=$bin:\$PATH
  kubectl get nodes
  kubectl apply -f hack/examples/pod.yaml
  kubectl logs hello; kubectl exec hello -- printenv GREETING
  kubectl top pod      # once metrics-server has scraped vk0 twice (about 20s)
Stop with Ctrl-C; \`make cluster-down\` removes the control plane.

EOT
if [[ $(id -u) != 0 ]]; then
	echo "not root: no node host, so running vk0 on loopback; the API server cannot proxy to it (kubectl logs/exec will not work)" >&2
	exec "$BIN/virtual-kubelet" --provider mock --nodename "$NODE" --kubeconfig "$CLUSTER_DIR/admin.kubeconfig" \
		--node-ip 127.0.0.1 --listen-address 127.0.0.1 --metrics-addr 127.0.0.1:10255
fi
# In the node host, VKUBELET_POD_IP and KUBECONFIG are set for the daemon.
exec "$BIN/cluster" exec --dir "$CLUSTER_DIR" "$NODE" -- "$BIN/virtual-kubelet" --provider mock --nodename "$NODE"
