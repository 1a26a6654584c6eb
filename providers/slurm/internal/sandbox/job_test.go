package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLogFileStampsRecordsAndRotates: each chunk becomes records of its
// stream, F for ended lines and P for a partial one, and the file rotates
// at its bound, keeping files - 1 old ones.
func TestLogFileStampsRecordsAndRotates(t *testing.T) {
	name := filepath.Join(t.TempDir(), "log")
	l, err := openLogFile(name, 1<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 28, 20, 1, 2, 30405, time.FixedZone("X", 3600))
	l.now = func() time.Time { return at }
	l.write("stdout", []byte("one\ntwo\npro"))
	l.write("stderr", []byte("mpt> \n"))
	want := "2026-11-28T19:01:02.000030405Z stdout F one\n" +
		"2026-11-28T19:01:02.000030405Z stdout F two\n" +
		"2026-11-28T19:01:02.000030405Z stdout P pro\n" +
		"2026-11-28T19:01:02.000030405Z stderr F mpt> \n"
	if got := readFile(t, name); got != want {
		t.Fatalf("log:\n%s\nwant:\n%s", got, want)
	}

	l.close()

	// A bound of two records: every second record rotates.
	const prefix = "2026-11-28T19:01:02.000030405Z stdout F "
	recLen := len(prefix + "0\n")
	name = filepath.Join(t.TempDir(), "log")
	if l, err = openLogFile(name, int64(2*recLen), 3); err != nil {
		t.Fatal(err)
	}
	l.now = func() time.Time { return at }
	for i := range 7 {
		l.write("stdout", []byte(strconv.Itoa(i)+"\n"))
	}
	l.close()
	for file, want := range map[string]string{"log.2": "23", "log.1": "45", "log": "6"} {
		var got string
		for _, line := range strings.SplitAfter(readFile(t, filepath.Join(filepath.Dir(name), file)), "\n") {
			if len(line) > 0 && len(line) != recLen {
				t.Errorf("%s: record %q, want %d bytes", file, line, recLen)
			}
			got += strings.TrimSuffix(strings.TrimPrefix(line, prefix), "\n")
		}
		if got != want {
			t.Errorf("%s holds the records of %q, want %q", file, got, want)
		}
	}
	if _, err := os.Stat(name + ".3"); !os.IsNotExist(err) {
		t.Errorf("log.3 kept: %v", err)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// fakeBwrap stands in for bubblewrap: it reports its pid as the child's on
// the info descriptor and runs the command after "--" in its place, in no
// namespace.
const fakeBwrap = `#!/bin/sh
while [ "$1" != -- ]; do shift; done
shift
printf '{"child-pid": %d}\n' $$ >&3
exec "$@"
`

// podDir lays out a pod directory with the containers given (name ->
// shell script), the first inits of them init containers, and returns it
// with the fake bubblewrap.
func podDir(t *testing.T, inits int, stdin map[string]bool, containers ...[2]string) (dir, bwrap string) {
	t.Helper()
	base := t.TempDir()
	dir = filepath.Join(base, "pod")
	bwrap = filepath.Join(base, "bwrap")
	files := map[string]string{"bwrap": fakeBwrap, "pod/logmax": "1048576 2\n", "pod/hostname": "p", "pod/hostpaths": "", "pod/hidden": ""}
	var init, main []string
	for i, c := range containers {
		if i < inits {
			init = append(init, c[0]+"\x00")
		} else {
			main = append(main, c[0]+"\x00")
		}
		cd := filepath.Join("pod", "c", c[0])
		for f, v := range map[string]string{"root": "", "workdir": "", "tty": "no", "stdin": "no", "env": "", "mounts": "",
			"argv": "/bin/sh\x00-c\x00" + c[1] + "\x00"} {
			files[filepath.Join(cd, f)] = v
		}
		if stdin[c[0]] {
			files[filepath.Join(cd, "stdin")] = "yes"
		}
	}
	files["pod/init"], files["pod/main"] = strings.Join(init, ""), strings.Join(main, "")
	for name, data := range files {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	return dir, bwrap
}

// exitCode is a container's exit file, or "" while it has none.
func exitCode(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "c", name, "exit"))
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// TestJobRunsInitsThenContainers: the init container runs first, the
// containers side by side after it; each one's output is stamped into its
// log, both streams, and its exit code recorded; one failing fails the job.
func TestJobRunsInitsThenContainers(t *testing.T) {
	dir, bwrap := podDir(t, 1, nil,
		[2]string{"setup", "echo ready > /dev/stderr; touch " + t.TempDir() + "/x; echo set"},
		[2]string{"a", "echo a; exit 3"},
		[2]string{"b", "printf 'no newline'"})
	code, err := Job(dir, bwrap)
	if err != nil || code != 1 {
		t.Fatalf("Job = %d, %v; want 1 (container a failed)", code, err)
	}
	for name, want := range map[string]string{"setup": "0", "a": "3", "b": "0"} {
		if got := exitCode(t, dir, name); got != want {
			t.Errorf("container %s: exit %q, want %q", name, got, want)
		}
	}
	log := readFile(t, filepath.Join(dir, "c", "setup", "log"))
	if !strings.Contains(log, " stderr F ready\n") || !strings.Contains(log, " stdout F set\n") {
		t.Errorf("setup's log lacks its records:\n%s", log)
	}
	if log := readFile(t, filepath.Join(dir, "c", "b", "log")); !strings.HasSuffix(log, " stdout P no newline\n") {
		t.Errorf("b's log = %q, want a partial record", log)
	}
}

// TestJobStopsAtAFailedInit: a failing init container ends the job; the
// containers after it never start.
func TestJobStopsAtAFailedInit(t *testing.T) {
	dir, bwrap := podDir(t, 1, nil, [2]string{"setup", "exit 2"}, [2]string{"main", "echo ran"})
	if code, err := Job(dir, bwrap); err != nil || code != 1 {
		t.Fatalf("Job = %d, %v; want 1", code, err)
	}
	if got := exitCode(t, dir, "setup"); got != "2" {
		t.Errorf("setup: exit %q, want 2", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "c", "main", "log")); !os.IsNotExist(err) {
		t.Errorf("the main container started after a failed init: %v", err)
	}
}

// TestJobPassesTermOn: a TERM to the job reaches the container as its
// stop signal, TERM unless its plan names another, which it traps and
// exits with its own code.
func TestJobPassesTermOn(t *testing.T) {
	for _, tc := range []struct {
		stopSignal, trapped string
	}{{"", "TERM"}, {"10", "USR1"}} {
		t.Run(tc.trapped, func(t *testing.T) {
			dir, bwrap := podDir(t, 0, nil, [2]string{"main", "trap 'echo bye TERM; exit 7' TERM; trap 'echo bye USR1; exit 7' USR1; echo trapping; while :; do sleep 0.05; done"})
			if tc.stopSignal != "" {
				if err := os.WriteFile(filepath.Join(dir, "c", "main", StopSignalFile), []byte(tc.stopSignal), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan int)
			go func() {
				code, err := Job(dir, bwrap)
				if err != nil {
					t.Error(err)
				}
				done <- code
			}()
			for range 200 {
				if data, _ := os.ReadFile(filepath.Join(dir, "c", "main", "log")); strings.Contains(string(data), "trapping") {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := waitJob(t, done, "after TERM"); code != 1 {
				t.Errorf("Job = %d, want 1", code)
			}
			if got := exitCode(t, dir, "main"); got != "7" {
				t.Errorf("main: exit %q, want 7 (its trap)", got)
			}
			if log := readFile(t, filepath.Join(dir, "c", "main", "log")); !strings.Contains(log, " stdout F bye "+tc.trapped+"\n") {
				t.Errorf("log = %q, want the %s trap's output", log, tc.trapped)
			}
		})
	}
}

// TestJobStdinHolder: a container with stdin reads the fifo, and sees its
// end once the holder named in in.holder is gone.
func TestJobStdinHolder(t *testing.T) {
	dir, bwrap := podDir(t, 0, map[string]bool{"main": true}, [2]string{"main", "cat; echo eof"})
	done := make(chan int)
	go func() {
		code, _ := Job(dir, bwrap)
		done <- code
	}()
	c := filepath.Join(dir, "c", "main")
	waitFile(t, filepath.Join(c, "in.holder"))
	if err := os.WriteFile(filepath.Join(c, "in"), []byte("typed\n"), 0); err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(c, "in.holder"))))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := waitJob(t, done, "once its stdin ended"); code != 0 {
		t.Errorf("Job = %d, want 0", code)
	}
	if log := readFile(t, filepath.Join(c, "log")); !strings.Contains(log, " stdout F typed\n") || !strings.Contains(log, " stdout F eof\n") {
		t.Errorf("log = %q, want the input, then eof", log)
	}
}

// waitJob waits for a Job's exit code.
func waitJob(t *testing.T, done <-chan int, what string) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(20 * time.Second):
		t.Fatalf("the job did not end %s", what)
		return 0
	}
}

// waitFile waits until a file exists and is not empty.
func waitFile(t *testing.T, name string) {
	t.Helper()
	for range 200 {
		if st, err := os.Stat(name); err == nil && st.Size() > 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", name)
}

// TestMainRefusesBadArguments: the usage is an exit code 1, not a panic.
func TestMainRefusesBadArguments(t *testing.T) {
	for _, args := range [][]string{nil, {"job"}, {"container", "a", "b"}, {"other", "a", "b"}} {
		if code := Main(args); code != 1 {
			t.Errorf("Main(%q) = %d, want 1", args, code)
		}
	}
}

// TestShellQuote: the launcher's command line for script(1) reads back as
// the words it was made of, whatever they hold.
func TestShellQuote(t *testing.T) {
	words := []string{"/work/.bin/launcher", "it's", "a b", "$(x)"}
	line := shellQuote(words...)
	out, err := execOutput("/bin/sh", "-c", `for w in `+line+`; do printf '%s\n' "$w"; done`)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); strings.Join(got, "|") != strings.Join(words, "|") {
		t.Errorf("read back %q, want %q", got, words)
	}
}

func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return string(out), err
}
