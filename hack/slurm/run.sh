#!/usr/bin/env bash
# `make run-slurm`: a local control plane, a one-node Slurm in the node host
# vk-slurm (hack/slurm/slurm.sh, on the host's loopback) and the virtual node
# vk-slurm, whose pods run as Slurm jobs (--provider slurm). Needs root: the
# daemon submits each namespace's jobs as its tenant user; the default
# namespace's run as vk-tenant-a (added by hack/slurm/slurm.sh), never root.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-$PWD/bin}
CLUSTER_DIR=${CLUSTER_DIR:-/tmp/virtual-kubelet/local}
SLURM_DIR=${SLURM_DIR:-/tmp/virtual-kubelet/slurm}
NODE=${NODE:-vk-slurm}

if [[ $(id -u) != 0 ]]; then
	echo "make run-slurm runs Slurm as root in a node host (a network namespace): run as root" >&2
	exit 1
fi
bin=$(hack/controlplane/build.sh)
metrics_server=()
if [[ ${METRICS_SERVER:-1} != 0 ]]; then
	metrics_server=(--metrics-server "$(hack/metrics-server/build.sh)")
fi
"$BIN/cluster" up --dir "$CLUSTER_DIR" --bin-dir "$bin" "${metrics_server[@]}"
# Slurm lives in the node's host, so the daemon, the jobs and port-forward
# share its loopback.
"$BIN/cluster" exec --dir "$CLUSTER_DIR" "$NODE" -- hack/slurm/slurm.sh start "$SLURM_DIR"

config=$SLURM_DIR/provider.yaml
cat >"$config" <<EOT
workDir: $SLURM_DIR/work
slurmConf: $SLURM_DIR/slurm.conf
pollInterval: 1s
images:
  busybox: {host: true}
  python: {prefix: [python3, -c]}
tenants:
- {namespaces: [default], user: vk-tenant-a}
EOT
cat <<EOT

In another terminal:
  export PATH=$bin:\$PATH KUBECONFIG=$CLUSTER_DIR/admin.kubeconfig
  kubectl apply -f hack/slurm/pod.yaml; kubectl get pods -o wide
  kubectl logs hello-slurm; kubectl exec hello-slurm -- cat /etc/greeting/text
  $BIN/cluster exec --dir $CLUSTER_DIR $NODE -- env SLURM_CONF=$SLURM_DIR/slurm.conf squeue   # the pod's job
Provider config: $config. Stop with Ctrl-C, then
  $BIN/cluster exec --dir $CLUSTER_DIR $NODE -- hack/slurm/slurm.sh stop $SLURM_DIR; make cluster-down

EOT
exec "$BIN/cluster" exec --dir "$CLUSTER_DIR" "$NODE" -- "$BIN/virtual-kubelet" --provider slurm --provider-config "$config" --nodename "$NODE"
