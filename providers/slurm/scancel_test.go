package slurm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// standInScancel installs a scancel that appends its argv (one line a
// call) to calls, sleeps a little so that requests pile up behind it, and
// then runs body (shell).
func standInScancel(t *testing.T, body string) (*scanceller, string) {
	t.Helper()
	bin := t.TempDir()
	calls := filepath.Join(bin, "calls")
	script := "#!/bin/sh\necho \"$*\" >> " + calls + "\nsleep 0.3\n" + body + "\n"
	if err := os.WriteFile(filepath.Join(bin, "scancel"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return newScanceller(newCLI(&Config{SlurmBin: bin})), calls
}

func readCalls(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// TestScancelBatchesABurst: requests that arrive while a scancel runs go
// to Slurm in one call; each caller gets its own job's result.
func TestScancelBatchesABurst(t *testing.T) {
	s, calls := standInScancel(t, "exit 0")
	ctx := context.Background()
	first := make(chan error)
	go func() { first <- s.stop(ctx, nil, stopTerm, "1") }()
	// The first call is running (its line written) before the burst.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if data, _ := os.ReadFile(calls); len(data) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first scancel never ran")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() { errs[i] = s.stop(ctx, nil, stopTerm, fmt.Sprint(100+i)) })
	}
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("job %d: %v", 100+i, err)
		}
	}
	got := readCalls(t, calls)
	if len(got) != 2 || got[0] != "--batch --signal=TERM 1" {
		t.Fatalf("scancel calls %q, want the first job alone and then the other 20 in one call", got)
	}
	ids := strings.Fields(strings.TrimPrefix(got[1], "--batch --signal=TERM "))
	if len(ids) != 20 || !strings.HasPrefix(got[1], "--batch --signal=TERM ") {
		t.Fatalf("second call %q, want --batch --signal=TERM and 20 job IDs", got[1])
	}
	// The lane goes once its last call is done, just after the callers
	// have their results.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		lanes := len(s.lanes)
		s.mu.Unlock()
		if lanes == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d lanes left once idle", lanes)
		}
	}
}

// TestScancelKindsAndUsersApart: a TERM and a cancel never share a call,
// nor do two users (Slurm lets each signal only their own jobs).
func TestScancelKindsAndUsersApart(t *testing.T) {
	s, calls := standInScancel(t, "exit 0")
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.stop(ctx, nil, stopTerm, "1"); err != nil {
			t.Error(err)
		}
	})
	wg.Go(func() {
		if err := s.stop(ctx, nil, stopCancel, "2"); err != nil {
			t.Error(err)
		}
	})
	wg.Wait()
	got := readCalls(t, calls)
	want := map[string]bool{"--batch --signal=TERM 1": true, "2": true}
	if len(got) != 2 || !want[got[0]] || !want[got[1]] || got[0] == got[1] {
		t.Fatalf("scancel calls %q, want one TERM of job 1 and one cancel of job 2", got)
	}
	a := &syscall.Credential{Uid: 1001, Gid: 1001}
	b := &syscall.Credential{Uid: 1002, Gid: 1002}
	if credKey(a) == credKey(b) || credKey(a) == credKey(nil) || credKey(a) != credKey(&syscall.Credential{Uid: 1001, Gid: 1001}) {
		t.Errorf("credKey: %q %q %q", credKey(a), credKey(b), credKey(nil))
	}
	if credKey(a) == credKey(&syscall.Credential{Uid: 1001, Gid: 1001, Groups: []uint32{0}}) {
		t.Error("credKey ignores the supplementary groups")
	}
}

// TestScancelErrorsPerJob: a job scancel names in an error line gets that
// error; the other jobs of the call were signalled.
func TestScancelErrorsPerJob(t *testing.T) {
	s, _ := standInScancel(t, `rc=0; for id; do if [ "$id" = 7 ]; then echo "scancel: error: Kill job error on job id 7: Invalid job id specified" >&2; rc=1; fi; done; exit $rc`)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := map[string]error{}
	var mu sync.Mutex
	// Two calls: 5 alone, then 6, 7 and 8 (or all four in one).
	for _, id := range []string{"5", "6", "7", "8"} {
		wg.Go(func() {
			err := s.stop(ctx, nil, stopTerm, id)
			mu.Lock()
			errs[id] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, id := range []string{"5", "6", "8"} {
		if errs[id] != nil {
			t.Errorf("job %s: %v, want nil: scancel named only job 7", id, errs[id])
		}
	}
	if errs["7"] == nil || !strings.Contains(errs["7"].Error(), "job id 7: Invalid job id") {
		t.Errorf("job 7: %v, want scancel's line for it", errs["7"])
	}
}

// TestScancelErrorsWhole: a failure that names no job (slurmctld down) is
// every job's error: nothing says any was signalled.
func TestScancelErrorsWhole(t *testing.T) {
	s, _ := standInScancel(t, `echo "scancel: error: Kill job error on job id 3: Invalid job id specified" >&2; echo "scancel: error: Unable to contact slurm controller (connect failure)" >&2; exit 1`)
	for _, id := range []string{"3", "4"} {
		err := s.stop(context.Background(), nil, stopCancel, id)
		if err == nil {
			t.Fatalf("job %s: nil error from a failed scancel", id)
		}
		if id == "4" && !strings.Contains(err.Error(), "Unable to contact slurm controller") {
			t.Errorf("job 4: %v, want the whole output", err)
		}
	}
}

// TestScancelErrorsAttribution covers scancelErrors' cases directly.
func TestScancelErrorsAttribution(t *testing.T) {
	exit := exec.Command("false").Run()
	ids := []string{"10", "11", "12"}
	for _, tc := range []struct {
		name   string
		err    error
		stderr string
		failed []string
	}{
		{"one job named", exit, "scancel: error: Kill job error on job id 11: Job/step already completing or completed\n", []string{"11"}},
		{"signal wording", exit, "scancel: error: Signal 15 to batch job 12: Invalid job id specified\n", []string{"12"}},
		{"a job not in the call is no job's", exit, "scancel: error: Kill job error on job id 99: Invalid job id specified\n", ids},
		{"no output", exit, "", ids},
		{"not an exit status", errors.New("signal: killed"), "scancel: error: Kill job error on job id 11: x\n", ids},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := scancelErrors(ids, tc.err, tc.stderr)
			for _, id := range ids {
				want := strings.Contains(" "+strings.Join(tc.failed, " ")+" ", " "+id+" ")
				if (got[id] != nil) != want {
					t.Errorf("job %s: error %v, want an error: %v", id, got[id], want)
				}
			}
		})
	}
}
