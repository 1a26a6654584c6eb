package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Files of a pod's plan for its devices and its stop signals. GPUsFile in
// the pod directory lists the indexes (comma-separated, ascending) of
// every GPU the pod's claims were allocated, and in c/NAME those of the
// container's; StopSignalFile in c/NAME has the number of the signal that
// stops the container, empty for TERM. A plan without them (written
// before they existed) has no GPUs and stops with TERM.
const (
	GPUsFile       = "gpus"
	StopSignalFile = "stopsignal"
)

// JobGPUsEnv is the variable in which Slurm gives a job the indexes of
// the GPUs it allocated it.
const JobGPUsEnv = "SLURM_JOB_GPUS"

// gpuVisibilityEnv are the variables Slurm sets for a job's GPUs (its
// gres/gpu plugin), which a container with GPUs gets set to its own.
var gpuVisibilityEnv = []string{"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ZE_AFFINITY_MASK"}

// readOptional reads a small file of the pod directory, empty when it
// does not exist.
func readOptional(dir string, elem ...string) (string, error) {
	data, err := ReadPodFile(dir, elem...)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(data)), err
}

// indexList reads a comma-separated list of GPU indexes.
func indexList(what, s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s: %q is not a list of GPU indexes", what, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// containerGPUs are the GPUs container name is to see, given the GPUs
// Slurm allocated the job (jobGPUs, SLURM_JOB_GPUS): the pod's k-th GPU,
// in the order of the devices' indexes, is the job's k-th. When Slurm
// picked the very devices the claims were allocated, which it does while
// the node's GPUs go through DRA only, that is the same index; a job that
// got fewer GPUs than the pod's devices is an error.
func containerGPUs(podDir, name, jobGPUs string) ([]int, error) {
	mine, err := readOptional(podDir, "c", name, GPUsFile)
	if err != nil || mine == "" {
		return nil, err
	}
	all, err := readOptional(podDir, GPUsFile)
	if err != nil {
		return nil, err
	}
	podIdx, err := indexList(GPUsFile, all)
	if err != nil {
		return nil, err
	}
	myIdx, err := indexList("c/"+name+"/"+GPUsFile, mine)
	if err != nil {
		return nil, err
	}
	slurmIdx, err := indexList(JobGPUsEnv, jobGPUs)
	if err != nil {
		return nil, err
	}
	slices.Sort(podIdx)
	slices.Sort(slurmIdx)
	var out []int
	for _, i := range myIdx {
		k := slices.Index(podIdx, i)
		if k < 0 {
			return nil, fmt.Errorf("GPU %d of the container is not one of the pod's (%s)", i, all)
		}
		if k >= len(slurmIdx) {
			return nil, fmt.Errorf("the pod has %d GPU devices but Slurm gave its job %d (%s=%q)", len(podIdx), len(slurmIdx), JobGPUsEnv, jobGPUs)
		}
		out = append(out, slurmIdx[k])
	}
	return out, nil
}

// gpuEnv is the environment that shows a container its GPUs; none
// without GPUs.
func gpuEnv(gpus []int) []string {
	if len(gpus) == 0 {
		return nil
	}
	list := make([]string, len(gpus))
	for i, n := range gpus {
		list[i] = strconv.Itoa(n)
	}
	env := make([]string, 0, len(gpuVisibilityEnv))
	for _, v := range gpuVisibilityEnv {
		env = append(env, v+"="+strings.Join(list, ","))
	}
	return env
}

// GPUIndexPlaceholder stands, in a GPU device file's path, for the GPU's
// index: /dev/nvidia{index}.
const GPUIndexPlaceholder = "{index}"

// GPUFilesFile in a pod directory lists (NUL-terminated) the device files
// a container with GPUs gets, those with GPUIndexPlaceholder once per GPU.
const GPUFilesFile = "gpufiles"

// appendGPUFiles binds the device files of gpus (the pod directory's
// GPUFilesFile) into the container's /dev, each as /dev/ and its base
// name, those that exist on the node.
func appendGPUFiles(argv []string, podDir string, gpus []int) ([]string, error) {
	if len(gpus) == 0 {
		return argv, nil
	}
	data, err := ReadPodFile(podDir, GPUFilesFile)
	if errors.Is(err, os.ErrNotExist) {
		return argv, nil
	}
	if err != nil {
		return nil, err
	}
	for _, tmpl := range NulFields(data) {
		paths := []string{tmpl}
		if strings.Contains(tmpl, GPUIndexPlaceholder) {
			paths = paths[:0]
			for _, n := range gpus {
				paths = append(paths, strings.ReplaceAll(tmpl, GPUIndexPlaceholder, strconv.Itoa(n)))
			}
		}
		for _, p := range paths {
			if base := filepath.Base(p); filepath.IsAbs(p) && base != "/" && base != ".." {
				argv = append(argv, "--dev-bind-try", p, "/dev/"+base)
			}
		}
	}
	return argv, nil
}

// stopSignal is the signal that stops container name: its plan's, or TERM.
func stopSignal(podDir, name string) syscall.Signal {
	s, err := readOptional(podDir, "c", name, StopSignalFile)
	if n, convErr := strconv.Atoi(s); err == nil && convErr == nil && n > 0 && n <= 64 {
		return syscall.Signal(n)
	}
	return syscall.SIGTERM
}
