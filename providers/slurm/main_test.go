package slurm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/testing/freeport"
	"github.com/vkubelet/virtual-kubelet/providers/slurm/internal/sandbox"
)

// The package's tests share one Slurm on loopback (hack/slurm/slurm.sh),
// started by the first test that needs it and stopped after the last.
var (
	slurmOnce sync.Once
	slurmConf string
	slurmDir  string
	slurmErr  error
)

func TestMain(m *testing.M) {
	// The tests' configs name this test binary as the container launcher
	// (writeConfig): installed under the launcher's name and run by a job,
	// it is the launcher.
	if filepath.Base(os.Args[0]) == LauncherName {
		fmt.Fprintln(os.Stderr, sandbox.Main(os.Args[1:]))
		os.Exit(1)
	}
	code := m.Run()
	if slurmDir != "" {
		_ = exec.Command(slurmScript(), "stop", slurmDir).Run()
		_ = os.RemoveAll(slurmDir)
	}
	os.Exit(code)
}

// slurmScript is hack/slurm/slurm.sh of this checkout.
func slurmScript() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "hack", "slurm", "slurm.sh")
}

// localSlurm returns the SLURM_CONF of the package's Slurm, starting it
// (and installing Debian's packages) the first time. It needs no control
// plane, so it runs with -short too.
func localSlurm(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("hack/slurm/slurm.sh runs Slurm as root")
	}
	slurmOnce.Do(func() {
		var ports [2]int
		for i := range ports {
			if ports[i], slurmErr = freeport.Next(); slurmErr != nil {
				return
			}
		}
		if slurmDir, slurmErr = os.MkdirTemp("", "vk-slurm-"); slurmErr != nil {
			return
		}
		cmd := exec.Command(slurmScript(), "start", slurmDir)
		cmd.Env = append(os.Environ(), "SLURMCTLD_PORT="+strconv.Itoa(ports[0]), "SLURMD_PORT="+strconv.Itoa(ports[1]))
		if out, err := cmd.CombinedOutput(); err != nil {
			slurmErr = fmt.Errorf("%v: %s", err, out)
			return
		}
		slurmConf = filepath.Join(slurmDir, "slurm.conf")
	})
	if slurmErr != nil {
		t.Fatalf("starting Slurm: %v", slurmErr)
	}
	return slurmConf
}

// slurmCommand runs a Slurm command against the package's Slurm.
func slurmCommand(ctx context.Context, conf, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
	return cmd.CombinedOutput()
}
