package slurm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/vkubelet/virtual-kubelet/providers/slurm/internal/sandbox"
)

// slurmCLI runs the Slurm commands; every argument is passed as its own
// argv element, never through a shell.
type slurmCLI struct {
	bin string
	// conf is SLURM_CONF for the commands; empty: their default.
	conf string
	env  []string
	// jobEnv is sbatch's environment, which jobs get (see sbatch).
	jobEnv []string
}

func newCLI(cfg *Config) *slurmCLI {
	env, jobEnv := os.Environ(), []string{sandbox.JobPath}
	if cfg.SlurmConf != "" {
		env = append(env, "SLURM_CONF="+cfg.SlurmConf)
		jobEnv = append(jobEnv, "SLURM_CONF="+cfg.SlurmConf)
	}
	return &slurmCLI{bin: cfg.SlurmBin, conf: cfg.SlurmConf, env: env, jobEnv: jobEnv}
}

// slurmEnv is what a command's environment must end with so that a
// variable a pod sets cannot point it at another Slurm.
func (s *slurmCLI) slurmEnv() []string {
	if s.conf == "" {
		return nil
	}
	return []string{"SLURM_CONF=" + s.conf}
}

// command is an exec.Cmd for a Slurm command, run as the user of cred (nil:
// the daemon's own). Slurm authenticates the process's user (munge), so a
// tenant's command can do to jobs what that user could by hand, no more.
func (s *slurmCLI) command(ctx context.Context, cred *syscall.Credential, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
	cmd.Env = s.env
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		// The daemon's working directory may be closed to the user.
		cmd.Dir = "/"
	}
	return cmd
}

// run runs a Slurm command as the user of cred and returns its standard
// output; the error carries its standard error.
func (s *slurmCLI) run(ctx context.Context, cred *syscall.Credential, name string, args ...string) ([]byte, error) {
	return output(s.command(ctx, cred, name, args...))
}

// output runs cmd and returns its standard output; the error carries its
// standard error.
func output(cmd *exec.Cmd) ([]byte, error) {
	name := filepath.Base(cmd.Path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// sbatch submits a job and returns its id. The job's environment is
// sbatch's own (--export=ALL), which is only PATH and SLURM_CONF: the
// daemon's stays out of jobs, and no login shell runs on the compute node
// to make one up for each job, as it does with --export=NONE (seconds a
// job where a profile does much).
func (s *slurmCLI) sbatch(ctx context.Context, cred *syscall.Credential, args ...string) (string, error) {
	cmd := s.command(ctx, cred, "sbatch", append([]string{"--parsable", "--export=ALL"}, args...)...)
	cmd.Env = s.jobEnv
	out, err := output(cmd)
	if err != nil {
		return "", err
	}
	// --parsable prints "id" or "id;cluster".
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return "", fmt.Errorf("sbatch: unexpected output %q", out)
	}
	return id, nil
}

// job is what squeue --json says of a job, the fields the provider reads.
type job struct {
	ID         uint64 `json:"job_id"`
	Name       string `json:"name"`
	UserID     uint32 `json:"user_id"`
	Comment    string `json:"comment"`
	State      string `json:"job_state"`
	Reason     string `json:"state_reason"`
	BatchHost  string `json:"batch_host"`
	StartTime  int64  `json:"start_time"`
	ExitCode   int    `json:"exit_code"`
	StdoutPath string `json:"standard_output"`
	// brief is set on a job of the poll's listing, which says neither
	// the job's comment nor, but by its filter, its name (see
	// listNamed).
	brief bool
}

// jobID is the job's id as the commands take it.
func (j *job) jobID() string { return strconv.FormatUint(j.ID, 10) }

// squeue lists every job Slurm knows (running, pending and recently
// finished); Slurm 22.05 ignores filters with --json, so the caller picks
// its own.
func (s *slurmCLI) squeue(ctx context.Context) ([]job, error) {
	out, err := s.run(ctx, nil, "squeue", "--json")
	if err != nil {
		return nil, err
	}
	return parseSqueue(out)
}

// parseSqueue reads squeue --json's output.
func parseSqueue(out []byte) ([]job, error) {
	var resp struct {
		Jobs   []job `json:"jobs"`
		Errors []any `json:"errors"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, fmt.Errorf("squeue --json: %v", err)
	}
	if len(resp.Errors) > 0 {
		return nil, fmt.Errorf("squeue --json: %v", resp.Errors)
	}
	return resp.Jobs, nil
}

// slurmNode is what sinfo --json says of a node.
type slurmNode struct {
	Name       string `json:"name"`
	Address    string `json:"address"`
	CPUs       int64  `json:"cpus"`
	RealMemory int64  `json:"real_memory"` // MiB
	// Gres is the node's GRES, "gpu:a100:4,mps:400" (see parseGres).
	Gres string `json:"gres"`
}

// sinfo lists the cluster's nodes.
func (s *slurmCLI) sinfo(ctx context.Context) ([]slurmNode, error) {
	out, err := s.run(ctx, nil, "sinfo", "--json")
	if err != nil {
		return nil, err
	}
	var resp struct {
		Nodes []slurmNode `json:"nodes"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, fmt.Errorf("sinfo --json: %v", err)
	}
	return resp.Nodes, nil
}
