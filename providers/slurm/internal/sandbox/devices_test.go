package sandbox

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestGPUEnv: a container's GPUs are the job's, rank for rank in the
// pod's devices: the same indexes when Slurm picked the claims' devices,
// Slurm's own when it picked others; a container without GPUs gets no
// variable, and a job with fewer GPUs than the pod's devices, or a list
// that is not one, is an error naming it.
func TestGPUEnv(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(GPUsFile, "1,3")
	write("c/a/"+GPUsFile, "3")
	write("c/b/"+GPUsFile, "")
	for _, tc := range []struct {
		name, job, want, err string
	}{
		{name: "a", job: "1,3", want: "3"},
		{name: "a", job: "2,0", want: "2"},
		{name: "b", job: "1,3", want: ""},
		{name: "none", job: "1,3", want: ""},
		{name: "a", job: "1", err: "the pod has 2 GPU devices but Slurm gave its job 1"},
		{name: "a", job: "1,x", err: `SLURM_JOB_GPUS: "1,x" is not a list of GPU indexes`},
	} {
		gpus, err := containerGPUs(dir, tc.name, tc.job)
		env := gpuEnv(gpus)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("container %s, job GPUs %q: %v, want an error saying %q", tc.name, tc.job, err, tc.err)
			}
			continue
		}
		var want []string
		if tc.want != "" {
			for _, v := range gpuVisibilityEnv {
				want = append(want, v+"="+tc.want)
			}
		}
		if err != nil || !slices.Equal(env, want) {
			t.Errorf("container %s, job GPUs %q: %q, %v; want %q", tc.name, tc.job, env, err, want)
		}
	}
}

// TestGPUFiles: the plan's device files of a container's GPUs, one per
// GPU where the path has the index, bound into its /dev if they exist;
// none for a container without GPUs or a plan without the file.
func TestGPUFiles(t *testing.T) {
	dir := t.TempDir()
	if argv, err := appendGPUFiles(nil, dir, []int{1}); err != nil || argv != nil {
		t.Errorf("no %s: %q, %v", GPUFilesFile, argv, err)
	}
	if err := os.WriteFile(filepath.Join(dir, GPUFilesFile), []byte("/dev/nvidia{index}\x00/dev/nvidiactl\x00relative\x00/\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	argv, err := appendGPUFiles([]string{"bwrap"}, dir, []int{1, 3})
	want := []string{"bwrap", "--dev-bind-try", "/dev/nvidia1", "/dev/nvidia1", "--dev-bind-try", "/dev/nvidia3", "/dev/nvidia3", "--dev-bind-try", "/dev/nvidiactl", "/dev/nvidiactl"}
	if err != nil || !slices.Equal(argv, want) {
		t.Errorf("argv %q, %v; want %q", argv, err, want)
	}
	if argv, err := appendGPUFiles(nil, dir, nil); err != nil || argv != nil {
		t.Errorf("no GPUs: %q, %v", argv, err)
	}
}

// TestStopSignalOfPlan: the plan's number, else TERM, also for a number
// that is no signal.
func TestStopSignalOfPlan(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"usr1": "10", "bad": "99", "text": "USR1"} {
		if err := os.MkdirAll(filepath.Join(dir, "c", name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "c", name, StopSignalFile), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]syscall.Signal{"usr1": syscall.SIGUSR1, "bad": syscall.SIGTERM, "text": syscall.SIGTERM, "none": syscall.SIGTERM} {
		if got := stopSignal(dir, name); got != want {
			t.Errorf("container %s: %v, want %v", name, got, want)
		}
	}
}

// TestArgsGiveTheContainerItsGPUs: bubblewrap's argv for a container with
// a GPU binds its device file, and its environment (the --args file) shows
// the GPU Slurm gave the job; its sibling without one gets neither.
func TestArgsGiveTheContainerItsGPUs(t *testing.T) {
	dir, bwrap := podDir(t, 0, nil, [2]string{"gpu", "true"}, [2]string{"cpu", "true"})
	for name, data := range map[string]string{GPUsFile: "1", "c/gpu/" + GPUsFile: "1", GPUFilesFile: "/dev/fake{index}\x00"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(JobGPUsEnv, "0")
	for name, want := range map[string]bool{"gpu": true, "cpu": false} {
		argv, keep, err := Args(dir, name, bwrap, keepFD)
		if err != nil {
			t.Fatal(err)
		}
		env, err := io.ReadAll(keep[len(keep)-1])
		for _, f := range keep {
			f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		bound := slices.Contains(argv, "/dev/fake0")
		visible := strings.Contains(string(env), "CUDA_VISIBLE_DEVICES\x000\x00")
		if bound != want || visible != want {
			t.Errorf("container %s: /dev/fake0 bound %v, CUDA_VISIBLE_DEVICES=0 %v; want %v (argv %q)", name, bound, visible, want, argv)
		}
	}
}
