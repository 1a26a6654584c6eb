#!/usr/bin/env bash
# `make run-two-clusters`: two local control planes, A and B. B gets a mock
# node (vk-workers) as its "workers"; A gets the node vk-b, whose provider
# (kubernetes) runs A's pods as pods in B. Both daemons run in node hosts, so
# each API server can proxy kubectl logs/exec to its node. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-$PWD/bin}
CLUSTER_DIR=${CLUSTER_DIR:-/tmp/virtual-kubelet/local}
CLUSTER_B_DIR=${CLUSTER_B_DIR:-/tmp/virtual-kubelet/cluster-b}
NODE=${NODE:-vk-b}
REMOTE_NAMESPACE=${REMOTE_NAMESPACE:-from-a}

if [[ $(id -u) != 0 ]]; then
	echo "two clusters need node hosts (network namespaces): run as root" >&2
	exit 1
fi
bin=$(hack/controlplane/build.sh)
# metrics-server in both (unless METRICS_SERVER=0): B's feeds the stats of
# vk-b, A's serves kubectl top from them.
metrics_server=()
if [[ ${METRICS_SERVER:-1} != 0 ]]; then
	metrics_server=(--metrics-server "$(hack/metrics-server/build.sh)")
fi
"$BIN/cluster" up --dir "$CLUSTER_DIR" --bin-dir "$bin" "${metrics_server[@]}"
"$BIN/cluster" up --dir "$CLUSTER_B_DIR" --bin-dir "$bin" "${metrics_server[@]}"
KUBECONFIG=$CLUSTER_B_DIR/admin.kubeconfig "$bin/kubectl" create namespace "$REMOTE_NAMESPACE" 2>/dev/null || true

# B's workers: a mock node in a node host of B, in the background.
"$BIN/cluster" exec --dir "$CLUSTER_B_DIR" vk-workers -- "$BIN/virtual-kubelet" --provider mock --nodename vk-workers \
	>"$CLUSTER_B_DIR/vk-workers.log" 2>&1 &
workers=$!
trap 'kill $workers 2>/dev/null || true' EXIT

config=$CLUSTER_DIR/$NODE-provider.yaml
key=$CLUSTER_DIR/$NODE-signing-key
[ -s "$key" ] || (umask 077 && head -c 32 /dev/urandom >"$key")
cat >"$config" <<EOT
remote:
  kubeconfig: $CLUSTER_B_DIR/admin-node.kubeconfig
namespace: $REMOTE_NAMESPACE
sourceCluster: a
signingKeyFile: $key
capacity: {cpu: "64", memory: 256Gi, pods: "1000"}
pods:
  tolerations: [{key: virtual-kubelet.io/provider, operator: Exists}]
EOT
cat <<EOT

In another terminal:
  export PATH=$bin:\$PATH
  export KUBECONFIG=$CLUSTER_DIR/admin.kubeconfig         # cluster A
  kubectl apply -f hack/examples/pod.yaml; kubectl get pod hello -o wide
  kubectl --kubeconfig $CLUSTER_B_DIR/admin.kubeconfig -n $REMOTE_NAMESPACE get pods -o wide   # cluster B
  kubectl top pod      # after both metrics-servers have scraped twice (about 40s)
Provider config: $config; B's mock node logs to $CLUSTER_B_DIR/vk-workers.log.
Stop with Ctrl-C; \`make cluster-down\` and \`make cluster-down CLUSTER_DIR=$CLUSTER_B_DIR\` remove the control planes.

EOT
"$BIN/cluster" exec --dir "$CLUSTER_DIR" "$NODE" -- "$BIN/virtual-kubelet" --provider kubernetes --provider-config "$config" --nodename "$NODE"
