package slurm

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The poll's listing: squeue --json formats every field of every job on
// the cluster, a cost that grows with the cluster's jobs and is paid each
// poll interval. The poll needs six fields of the node's jobs only, so it
// asks squeue for those jobs by name (--name, exact) and for those fields,
// none of which a tenant writes: no job name (the filter says it), no
// comment. The job ID sbatch returned and the owner's uid identify the
// pod's job (see Provider.owns). Anything the parser does not expect
// refuses the whole listing, and the poll falls back to squeue --json.

// listFormat is the fields, separated by '|': the job ID (unique for each
// element of an array), the owner's uid, the state, the batch host, the
// start time (epoch seconds, by SLURM_TIME_FORMAT) and last, as it may
// hold blanks, the reason (Slurm's own words).
const listFormat = "%A|%U|%T|%B|%S|%r"

// listFields is how many fields listFormat has.
const listFields = 6

// listingError is a listing the parser refused: the poll then asks squeue
// --json instead.
type listingError struct {
	line int
	why  string
}

func (e *listingError) Error() string {
	return fmt.Sprintf("squeue --format %s: line %d: %s", listFormat, e.line, e.why)
}

// listNamed lists the jobs named name, in every state Slurm still keeps,
// with the fields of listFormat.
func (s *slurmCLI) listNamed(ctx context.Context, name string) ([]job, error) {
	cmd := s.command(ctx, nil, "squeue", "--noheader", "--all", "--states=all", "--name="+name, "--format="+listFormat)
	cmd.Env = append(slices.Clip(s.env), "SLURM_TIME_FORMAT=%s")
	out, err := output(cmd)
	if err != nil {
		return nil, err
	}
	return parseListing(out, name)
}

// parseListing reads listNamed's output: one line per job, each field as
// listFormat says. Every job is named name (squeue's filter matched it);
// its comment is not known (job.brief).
func parseListing(out []byte, name string) ([]job, error) {
	text := string(out)
	if text == "" {
		return nil, nil
	}
	text, ended := strings.CutSuffix(text, "\n")
	if !ended {
		return nil, &listingError{line: strings.Count(text, "\n") + 1, why: "the output does not end with a newline"}
	}
	lines := strings.Split(text, "\n")
	jobs := make([]job, 0, len(lines))
	seen := make(map[uint64]bool, len(lines))
	for i, line := range lines {
		refuse := func(why string, args ...any) ([]job, error) {
			return nil, &listingError{line: i + 1, why: fmt.Sprintf(why, args...)}
		}
		f := strings.SplitN(line, "|", listFields)
		if len(f) != listFields {
			return refuse("%d fields, want %d", len(f), listFields)
		}
		id, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil || id == 0 {
			return refuse("job ID %q is not a positive number", f[0])
		}
		if seen[id] {
			return refuse("job %d is listed twice", id)
		}
		seen[id] = true
		uid, err := strconv.ParseUint(f[1], 10, 32)
		if err != nil {
			return refuse("user ID %q is not a number", f[1])
		}
		if !isStateName(f[2]) {
			return refuse("state %q is not a Slurm job state", f[2])
		}
		if !printable(f[3]) || !printable(f[5]) {
			return refuse("unprintable bytes in the batch host or reason")
		}
		j := job{ID: id, UserID: uint32(uid), Name: name, State: f[2], Reason: f[5], StartTime: epoch(f[4]), brief: true}
		// squeue prints a placeholder (n/a) until the job has a host.
		if h := f[3]; h != "" && h != "(null)" && !strings.EqualFold(h, "none") && !strings.EqualFold(h, "n/a") && !strings.ContainsAny(h, " \t") {
			j.BatchHost = h
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// isStateName reports whether s looks like a job state squeue prints
// (RUNNING, OUT_OF_MEMORY, ...).
func isStateName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if (r < 'A' || r > 'Z') && r != '_' {
			return false
		}
	}
	return true
}

// printable reports whether s is printable ASCII.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// epoch is a time squeue printed as epoch seconds; 0 for its placeholders
// (N/A, Unknown, None) and anything else.
func epoch(s string) int64 {
	t, err := strconv.ParseInt(s, 10, 64)
	if err != nil || t < 0 {
		return 0
	}
	return t
}
