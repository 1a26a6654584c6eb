// Command virtual-kubelet-slurm-container runs a pod's Slurm job: the
// slurm provider installs it in its work directory, and every job's batch
// script (job.sh) becomes it:
//
//	virtual-kubelet-slurm-container job POD_DIR BWRAP
//
// It starts each container under bubblewrap, stamps its output into its
// log and records its exit code (see package sandbox). It is a program of
// its own, apart from virtual-kubelet, so that a job costs a millisecond to
// start, not the daemon's initialisation.
package main

import (
	"os"

	"github.com/vkubelet/virtual-kubelet/providers/slurm/internal/sandbox"
)

func main() { os.Exit(sandbox.Main(os.Args[1:])) }
