#!/bin/sh
# The batch script of every pod the slurm provider of virtual-kubelet runs.
# Its text never changes: what the pod runs is read as data from the pod
# directory, never parsed as shell.
#
#   job.sh POD_DIR LAUNCHER BWRAP
#
# The job runs as the pod's tenant. LAUNCHER (virtual-kubelet-slurm-container)
# is the job from here on, in this process: it starts the containers under
# bubblewrap (BWRAP), stamps their output into their logs, records their
# exit codes and passes a TERM on to them (see its package sandbox). One
# process, not a shell and a helper per container: Slurm's accounting
# samples every process of every job.
umask 077
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
exec "$2" job "$1" "$3"
