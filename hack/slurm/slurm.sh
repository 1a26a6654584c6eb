#!/usr/bin/env bash
# A one-node Slurm on loopback for `make run-slurm` and the slurm provider's
# e2e tests: munged, slurmctld and slurmd as root, as in production, with a
# generated slurm.conf, every file under one directory; jobs run as the
# users that submit them, such as the two tenant users install creates
# (vk-tenant-a and vk-tenant-b).
#
#   hack/slurm/slurm.sh install      apt-get install slurm-wlm munge bubblewrap when missing, add the tenant users
#   hack/slurm/slurm.sh start [DIR]  install, then start (idempotent); prints SLURM_CONF
#   hack/slurm/slurm.sh stop  [DIR]  stop the daemons started in DIR
#
# DIR defaults to /tmp/vk-slurm. SLURMCTLD_PORT and SLURMD_PORT (6817 and
# 6818) let several such Slurms share one loopback; SLURM_JOBS_PER_CORE (64)
# is how many jobs may share a core (the slurm bench sets more);
# SLURM_ACCT_GATHER_FREQUENCY (5 s, for kubectl top's sstat) how often each
# job's processes are sampled (Slurm's default is 30); SLURM_GPUS (0) how
# many GPUs of type SLURM_GPU_TYPE (fake) the node has, a GRES gpu whose
# gres.conf File= entries are device nodes made in DIR/dev (copies of
# /dev/null: Slurm only needs them to exist). Run `start` inside a network namespace
# (ip netns exec NS ...) to get a Slurm of the namespace's own: the daemons
# listen on its loopback only. Debian 12's Slurm (22.05) is what it is
# written for: proctrack/linuxproc and task/none, so it needs neither cgroups
# nor systemd.
set -euo pipefail

cmd=${1:-}
dir=${2:-/tmp/vk-slurm}
ctld_port=${SLURMCTLD_PORT:-6817}
slurmd_port=${SLURMD_PORT:-6818}
jobs_per_core=${SLURM_JOBS_PER_CORE:-64}
acct_frequency=${SLURM_ACCT_GATHER_FREQUENCY:-5}
gpus=${SLURM_GPUS:-0}
gpu_type=${SLURM_GPU_TYPE:-fake}

install() {
	local missing=()
	command -v slurmctld >/dev/null || missing+=(slurm-wlm)
	command -v munged >/dev/null || missing+=(munge)
	command -v bwrap >/dev/null || missing+=(bubblewrap)
	local u
	for u in vk-tenant-a vk-tenant-b; do
		id "$u" >/dev/null 2>&1 && continue
		if ((EUID != 0)); then
			echo "slurm.sh: user $u missing; run as root to add it" >&2
			exit 1
		fi
		useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$u"
	done
	((${#missing[@]} == 0)) && return
	if ((EUID != 0)); then
		echo "slurm.sh: ${missing[*]} missing; run as root to apt-get install them" >&2
		exit 1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# running PIDFILE: the daemon whose pid the file holds is alive.
running() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# waitfor WHAT CMD...: retry CMD for up to 60 s.
waitfor() {
	local what=$1
	shift
	for _ in $(seq 600); do
		"$@" >/dev/null 2>&1 && return
		sleep 0.1
	done
	echo "slurm.sh: $what did not come up; logs in $dir" >&2
	exit 1
}

# write_gres: the node's GRES line for slurm.conf, and gres.conf with its
# fake devices, when SLURM_GPUS is set.
write_gres() {
	((gpus > 0)) || return 0
	mkdir -p "$dir/dev"
	local i
	for ((i = 0; i < gpus; i++)); do
		[[ -e $dir/dev/gpu$i ]] || mknod -m 0666 "$dir/dev/gpu$i" c 1 3
	done
	echo "Name=gpu Type=$gpu_type File=$dir/dev/gpu[0-$((gpus - 1))]" >"$dir/gres.conf"
}

write_conf() {
	local cpus mem gres="" gres_types=""
	cpus=$(nproc)
	if ((gpus > 0)); then
		write_gres
		gres=" Gres=gpu:$gpu_type:$gpus"
		gres_types="GresTypes=gpu"
	fi
	mem=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024))
	# Cores are shared by up to $jobs_per_core jobs (OverSubscribe=FORCE):
	# pods are mostly idle processes, and a 2-core machine must run dozens.
	cat >"$dir/slurm.conf" <<EOF
ClusterName=vk
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
PlugStackConfig=$dir/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=$acct_frequency
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SchedulerParameters=sched_interval=2
MinJobAge=300
KillWait=5
# Launching a burst of jobs on two cores can keep slurmd from answering
# within the default 10 s; a launch that times out is requeued and held.
MessageTimeout=60
$gres_types
NodeName=vk-slurm NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=$cpus RealMemory=$mem$gres State=UNKNOWN
PartitionName=vk Nodes=vk-slurm Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:$jobs_per_core
EOF
	: >"$dir/plugstack.conf"
}

start() {
	install
	mkdir -p "$dir"/{munge,munge-key,state,spool}
	# Users' commands reach munged's socket and slurm.conf beneath $dir;
	# the key and the daemons' state stay root's.
	chmod 0711 "$dir"
	chmod 0755 "$dir/munge"
	# slurmd keeps its spool open to the jobs' users: their scripts run from it.
	chmod 0700 "$dir/munge-key" "$dir/state"
	[[ -f $dir/munge-key/munge.key ]] || mungekey --create --keyfile="$dir/munge-key/munge.key"
	[[ -f $dir/slurm.conf ]] || write_conf
	export SLURM_CONF=$dir/slurm.conf
	if ! running "$dir/munge-key/munged.pid"; then
		munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge-key/munge.key" \
			--pid-file="$dir/munge-key/munged.pid" --log-file="$dir/munge-key/munged.log" --seed-file="$dir/munge-key/munged.seed"
	fi
	waitfor munged munge -S "$dir/munge/munge.socket" -n
	running "$dir/slurmctld.pid" || slurmctld -f "$SLURM_CONF"
	waitfor slurmctld scontrol ping
	# slurmd's cgroup plugin must find a cgroup (v1) layout, even with
	# task/none and proctrack/linuxproc, which use none; `ip netns exec`
	# remounts /sys without one. The named systemd hierarchy, which has no
	# controllers, is enough; the mounts stay in the mount namespace ip made
	# for this script.
	if [[ -d /sys/fs/cgroup ]] && ! mountpoint -q /sys/fs/cgroup; then
		mount -t tmpfs cgroup /sys/fs/cgroup
		mkdir /sys/fs/cgroup/systemd
		mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
	fi
	running "$dir/slurmd.pid" || slurmd -f "$SLURM_CONF" -N vk-slurm
	waitfor "the node" bash -c '[[ $(sinfo -h -N -o %t) =~ ^(idle|mix|alloc) ]]'
	cat <<EOF
Slurm is up (logs and state in $dir). Its commands need:
  export SLURM_CONF=$SLURM_CONF
e.g. sinfo; squeue; sbatch --wrap 'hostname'
Stop it with: $0 stop $dir
EOF
}

stop() {
	local pidfile
	for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge-key/munged.pid"; do
		if running "$pidfile"; then
			local pid
			pid=$(cat "$pidfile")
			kill "$pid"
			for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		fi
	done
}

case $cmd in
install) install ;;
start) start ;;
stop) stop ;;
*)
	echo "usage: $0 install | start [DIR] | stop [DIR]" >&2
	exit 2
	;;
esac
