// Command virtual-kubelet-slurm-container starts one container of a pod's
// Slurm job under bubblewrap. The slurm provider installs it in its work
// directory and every job runs it once per container:
//
//	virtual-kubelet-slurm-container POD_DIR CONTAINER BWRAP
//
// It is a program of its own, apart from virtual-kubelet, so that a
// container start costs a millisecond, not the daemon's initialisation.
package main

import (
	"fmt"
	"os"

	"github.com/vkubelet/virtual-kubelet/providers/slurm/internal/sandbox"
)

func main() {
	err := sandbox.Main(os.Args[1:])
	fmt.Fprintf(os.Stderr, "virtual-kubelet-slurm-container: %v\n", err)
	os.Exit(1)
}
