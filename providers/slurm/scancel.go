package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopKind is what a scancel does to a job.
type stopKind int

const (
	// stopTerm sends TERM to the job's batch step only: the launcher
	// passes it on to the containers, which end the job by exiting (a
	// graceful delete).
	stopTerm stopKind = iota
	// stopCancel cancels the job: Slurm signals all its processes and
	// kills them after its KillWait.
	stopCancel
)

func (k stopKind) args() []string {
	if k == stopTerm {
		return []string{"--batch", "--signal=TERM"}
	}
	return nil
}

// scancelTimeout bounds one scancel call; no caller's context does, as a
// call serves many callers.
const scancelTimeout = time.Minute

// maxScancelIDs bounds the job IDs of one scancel call (its argv).
const maxScancelIDs = 500

// scanceller runs scancel for many jobs at once. Pods are deleted in
// bursts (a Deployment scaled down, a namespace deleted): one scancel
// process per job costs a fork, a munge credential and a connection to
// slurmctld each, and with dozens at once slurmctld answers each, and the
// poll's squeue, in seconds. Requests are grouped by user and kind: the
// first runs at once, and those that arrive while it runs go together in
// the next call. Each caller still learns its own job's result.
type scanceller struct {
	cli *slurmCLI

	mu    sync.Mutex
	lanes map[scancelKey]*scancelLane
}

// scancelKey groups requests that one scancel can carry: the same user
// (Slurm lets a user signal only their own jobs) and the same kind.
type scancelKey struct {
	user string // "" for the daemon's own
	kind stopKind
}

// scancelLane is one key's calls: one at a time, the next gathering.
type scancelLane struct {
	next *scancelBatch // nil until a request comes while a call runs
}

// scancelBatch is one scancel call's jobs and, once done is closed, each
// job's result.
type scancelBatch struct {
	cred *syscall.Credential
	kind stopKind
	ids  []string
	errs map[string]error
	done chan struct{}
}

func newScanceller(cli *slurmCLI) *scanceller {
	return &scanceller{cli: cli, lanes: map[scancelKey]*scancelLane{}}
}

// credKey names a credential's user, group and groups: the requests of
// one key may share a call made with any of their credentials.
func credKey(cred *syscall.Credential) string {
	if cred == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d:%d", cred.Uid, cred.Gid)
	for _, g := range cred.Groups {
		fmt.Fprintf(&b, ",%d", g)
	}
	return b.String()
}

// stop does kind to job id as the user of cred and returns that job's
// result, or ctx's error if ctx ends first (the call still runs).
func (s *scanceller) stop(ctx context.Context, cred *syscall.Credential, kind stopKind, id string) error {
	key := scancelKey{user: credKey(cred), kind: kind}
	s.mu.Lock()
	lane, busy := s.lanes[key]
	if !busy {
		lane = &scancelLane{}
		s.lanes[key] = lane
	}
	if lane.next == nil {
		lane.next = &scancelBatch{cred: cred, kind: kind, done: make(chan struct{})}
	}
	b := lane.next
	if !slices.Contains(b.ids, id) {
		b.ids = append(b.ids, id)
	}
	if !busy {
		go s.drain(key, lane)
	}
	s.mu.Unlock()
	select {
	case <-b.done:
		return b.errs[id]
	case <-ctx.Done():
		return ctx.Err()
	}
}

// drain runs the lane's batches one after the other until none is
// waiting, then removes the lane.
func (s *scanceller) drain(key scancelKey, lane *scancelLane) {
	for {
		s.mu.Lock()
		b := lane.next
		lane.next = nil
		if b == nil {
			delete(s.lanes, key)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		b.errs = map[string]error{}
		for ids := range slices.Chunk(b.ids, maxScancelIDs) {
			s.run(b.cred, b.kind, ids, b.errs)
		}
		close(b.done)
	}
}

// run runs one scancel for ids and records each job's error in errs.
func (s *scanceller) run(cred *syscall.Credential, kind stopKind, ids []string, errs map[string]error) {
	ctx, cancel := context.WithTimeout(context.Background(), scancelTimeout)
	defer cancel()
	cmd := s.cli.command(ctx, cred, "scancel", append(kind.args(), ids...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		return
	}
	for id, e := range scancelErrors(ids, err, stderr.String()) {
		errs[id] = e
	}
}

// scancelJobError is the line scancel writes for a job it could not
// signal or cancel: "scancel: error: Kill job error on job id 12: Invalid
// job id specified", or with "Signal 15 to batch job 12" in its place.
var scancelJobError = regexp.MustCompile(`^scancel: error: .*?\bjob (?:id )?([0-9]+)\b.*$`)

// scancelErrors attributes a failed scancel's error to its jobs: a job
// its own error line names gets that line; when every line of the output
// names a job, the others were done; otherwise (no output, or a failure
// that names no job, such as slurmctld not answering) every job not named
// gets the whole error, as nothing says it was done.
func scancelErrors(ids []string, err error, stderr string) map[string]error {
	named := map[string]error{}
	whole := true
	var unnamed []string
	for line := range strings.Lines(stderr) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if m := scancelJobError.FindStringSubmatch(line); m != nil && slices.Contains(ids, m[1]) {
			named[m[1]] = errors.New("scancel: " + line)
			continue
		}
		unnamed = append(unnamed, line)
	}
	if len(named) > 0 && len(unnamed) == 0 {
		whole = false
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		whole = true // killed by the timeout, or never started
	}
	out := map[string]error{}
	for _, id := range ids {
		switch {
		case named[id] != nil:
			out[id] = named[id]
		case whole:
			out[id] = fmt.Errorf("scancel of %d jobs: %v: %s", len(ids), err, strings.TrimSpace(stderr))
		}
	}
	return out
}
