package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The files of a pod's job, beside the plan the daemon writes (see Args):
// POD_DIR/init and POD_DIR/main list the containers (NUL-terminated), and
// each c/NAME holds its plan, with stdin ("yes" when the container keeps a
// standard input to attach to) and tty ("yes" when it runs on a terminal of
// its own). The job writes c/NAME/info (bubblewrap's JSON, with the
// container's pid), c/NAME/log (its output as records, see logFile) and
// c/NAME/exit (its exit code), each exit file complete once it exists. A
// container with stdin reads the fifo c/NAME/in, which a holder process
// (pid in c/NAME/in.holder) keeps open for writing, so the container sees
// end of file only once the holder is gone and no attach writes.

// Job runs a pod's job, the whole of its batch script: the init containers
// one after the other (a failing one ends the job), then the others side
// by side, each under bubblewrap, its output stamped into its log by this
// process. It returns 0 when every container exited 0, 1 when one did not,
// and 143 when a TERM came before all init containers had run. A TERM
// (scancel --batch --signal=TERM, a graceful delete) goes on to every
// running container's process as its stop signal (TERM unless its plan
// names another, see StopSignalFile), which it may trap; the job ends when
// they exit.
//
// One process per job, not a shell with a stamper per container: every
// process of a job is sampled by Slurm's accounting at each interval.
func Job(podDir, bwrap string) (int, error) {
	unix.Umask(0o077)
	self, err := os.Executable()
	if err != nil {
		return 1, err
	}
	j := &job{dir: podDir, bwrap: bwrap, self: self, running: map[string]bool{}}
	if err := j.readPlan(); err != nil {
		return 1, err
	}
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	defer signal.Stop(terms)
	go func() {
		for range terms {
			j.forwardTerm()
		}
	}()
	for _, name := range j.init {
		if j.isStopping() {
			return 143, nil
		}
		if j.run(name) != 0 {
			return 1, nil
		}
	}
	var wg sync.WaitGroup
	codes := make([]int, len(j.main))
	for i, name := range j.main {
		c := j.start(name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = j.finish(c)
		}()
	}
	wg.Wait()
	for _, code := range codes {
		if code != 0 {
			return 1, nil
		}
	}
	return 0, nil
}

// job is a pod's job as it runs.
type job struct {
	dir, bwrap, self string
	init, main       []string
	logMax           int64
	logFiles         int

	mu       sync.Mutex
	stopping bool
	running  map[string]bool // by name: started, exit file not yet written
}

// readPlan reads the container lists and the log bounds.
func (j *job) readPlan() error {
	for _, l := range []struct {
		to   *[]string
		name string
	}{{&j.init, "init"}, {&j.main, "main"}} {
		data, err := ReadPodFile(j.dir, l.name)
		if err != nil {
			return err
		}
		*l.to = NulFields(data)
	}
	data, err := ReadPodFile(j.dir, "logmax")
	if err != nil {
		return err
	}
	if _, err := fmt.Sscan(string(data), &j.logMax, &j.logFiles); err != nil || j.logMax < 1 || j.logFiles < 1 {
		return fmt.Errorf("logmax: want the bytes a log file and the files a container, got %q", data)
	}
	for _, name := range append(append([]string(nil), j.init...), j.main...) {
		if !ValidContainerName(name) {
			return fmt.Errorf("%q is not a container name", name)
		}
	}
	return nil
}

func (j *job) isStopping() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stopping
}

// childPIDField is the container's pid in bubblewrap's info file.
var childPIDField = regexp.MustCompile(`"child-pid":\s*([0-9]+)`)

// forwardTerm sends its stop signal (TERM unless its lifecycle names
// another) to the process of every running container that bubblewrap has
// reported, and marks the job stopping.
func (j *job) forwardTerm() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stopping = true
	for name := range j.running {
		info, err := ReadPodFile(j.dir, "c", name, "info")
		if m := childPIDField.FindSubmatch(info); err == nil && m != nil {
			if pid, err := strconv.Atoi(string(m[1])); err == nil && pid > 1 {
				_ = unix.Kill(pid, stopSignal(j.dir, name))
			}
		}
	}
}

// container is a started container.
type container struct {
	name   string
	cmd    *exec.Cmd     // nil when it could not start
	holder *exec.Cmd     // of the stdin fifo's write end; nil without stdin
	logged chan struct{} // closed once the log has all the output
}

// run runs a container to its end and returns its exit code.
func (j *job) run(name string) int { return j.finish(j.start(name)) }

// start starts container name: its output goes through pipes to its log.
// A container that cannot start is reported by finish, as exit code 1
// with the reason in its log.
func (j *job) start(name string) *container {
	c := &container{name: name, logged: make(chan struct{})}
	dir := filepath.Join(j.dir, "c", name)
	j.mu.Lock()
	j.running[name] = true
	j.mu.Unlock()
	log, r, w, err := openOutput(filepath.Join(dir, "log"), j.logMax, j.logFiles)
	if err != nil {
		fmt.Fprintf(os.Stderr, "virtual-kubelet-slurm-container: container %s: %v\n", name, err)
		close(c.logged)
		return c
	}
	go func() {
		var wg sync.WaitGroup
		for i, stream := range []string{"stdout", "stderr"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer r[i].Close()
				log.copyFrom(r[i], stream)
			}()
		}
		wg.Wait()
		log.close()
		close(c.logged)
	}()
	outW, errW := w[0], w[1]
	defer outW.Close()
	defer errW.Close()
	if c.cmd, c.holder, err = j.launch(name, dir, outW, errW); err != nil {
		fmt.Fprintf(errW, "virtual-kubelet-slurm-container: container %s: %v\n", name, err)
	}
	return c
}

// openOutput opens a container's log and the pipes for its stdout and
// stderr: r for the log's side, w for the container's.
func openOutput(name string, max int64, files int) (l *logFile, r, w [2]*os.File, err error) {
	if l, err = openLogFile(name, max, files); err != nil {
		return nil, r, w, err
	}
	for i := range r {
		if r[i], w[i], err = os.Pipe(); err != nil {
			l.close()
			for _, f := range append(r[:i:i], w[:i]...) {
				f.Close()
			}
			return nil, r, w, err
		}
	}
	return l, r, w, nil
}

// launch starts the container's process (and its stdin's holder) with its
// output to out and err.
func (j *job) launch(name, dir string, out, errOut *os.File) (cmd, holder *exec.Cmd, err error) {
	flags := map[string]bool{}
	for _, f := range []string{"stdin", "tty"} {
		data, err := ReadPodFile(dir, f)
		if err != nil {
			return nil, nil, err
		}
		flags[f] = string(data) == "yes"
	}
	info, err := os.OpenFile(filepath.Join(dir, "info"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, nil, err
	}
	defer info.Close()
	in, err := os.Open(os.DevNull)
	if err != nil {
		return nil, nil, err
	}
	defer func() { in.Close() }()
	if flags["stdin"] {
		in.Close()
		if holder, in, err = holdStdin(dir); err != nil {
			return nil, nil, err
		}
	}
	defer func() {
		if err != nil && holder != nil {
			stop(holder)
		}
	}()
	if flags["tty"] {
		// script (util-linux) runs the launcher on a new terminal, whose
		// output is its stdout. It takes a command line for $SHELL.
		line := shellQuote(j.self, "container", j.dir, name, j.bwrap)
		cmd = exec.Command("script", "--quiet", "--return", "--flush", "--command", line, os.DevNull)
		cmd.Env = []string{JobPath, "SHELL=/bin/bash", JobGPUsEnv + "=" + os.Getenv(JobGPUsEnv)}
		cmd.ExtraFiles = []*os.File{info}
	} else {
		argv, keep, err := Args(j.dir, name, j.bwrap, keepFD)
		if err != nil {
			return nil, nil, err
		}
		defer func() {
			for _, f := range keep {
				f.Close()
			}
		}()
		cmd = &exec.Cmd{Path: j.bwrap, Args: argv, Env: []string{JobPath}, ExtraFiles: append([]*os.File{info}, keep...)}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, out, errOut
	// bubblewrap's --die-with-parent: a signal that kills this process
	// (scancel, a time limit) kills the container too; orphaned, it would
	// escape proctrack/linuxproc, which finds a job's processes by their
	// parents, and outlive the job.
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	return cmd, holder, nil
}

// holdStdin makes the container's stdin fifo, dir/in, and starts its
// holder, a process that keeps its write end open (an attach with
// stdinOnce stops it, by the pid in dir/in.holder); it returns the holder
// and the fifo's read end for the container.
func holdStdin(dir string) (*exec.Cmd, *os.File, error) {
	fifo := filepath.Join(dir, "in")
	if err := os.Remove(fifo); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		return nil, nil, err
	}
	// Read-write: the open does not wait for a reader, and sleep never
	// reads.
	rw, err := os.OpenFile(fifo, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, nil, err
	}
	defer rw.Close()
	holder := exec.Command("sleep", "infinity")
	holder.Stdin, holder.Env = rw, []string{JobPath}
	if err := holder.Start(); err != nil {
		return nil, nil, err
	}
	// The holder has a writer open: this open does not wait.
	r, err := os.OpenFile(fifo, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err == nil {
		err = putFile(filepath.Join(dir, "in.holder"), strconv.Itoa(holder.Process.Pid)+"\n")
	}
	if err != nil {
		stop(holder)
		if r != nil {
			r.Close()
		}
		return nil, nil, err
	}
	return holder, r, nil
}

// stop kills and reaps a process.
func stop(cmd *exec.Cmd) {
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// logDrain bounds the wait for a container's log once it exited: a process
// it left behind may keep its output open.
const logDrain = 2 * time.Second

// finish waits for a started container, records its exit code and returns
// it. Its log is complete before the exit file says it ended, unless a
// process it left behind keeps its output open for more than logDrain.
func (j *job) finish(c *container) int {
	code := 1
	if c.cmd != nil {
		err := c.cmd.Wait()
		var exit *exec.ExitError
		switch {
		case err == nil:
			code = 0
		case errors.As(err, &exit):
			code = exit.ExitCode()
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				// As a shell reports a child a signal killed.
				code = 128 + int(ws.Signal())
			}
		}
	}
	select {
	case <-c.logged:
	case <-time.After(logDrain):
	}
	if c.holder != nil {
		stop(c.holder)
	}
	dir := filepath.Join(j.dir, "c", c.name)
	j.mu.Lock()
	delete(j.running, c.name)
	j.mu.Unlock()
	if err := putFile(filepath.Join(dir, "exit"), strconv.Itoa(code)+"\n"); err != nil {
		fmt.Fprintf(os.Stderr, "virtual-kubelet-slurm-container: container %s: %v\n", c.name, err)
	}
	return code
}

// putFile writes a file in one rename, so a reader never sees half of it.
func putFile(name, data string) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// shellQuote is a command line a POSIX shell reads back as words.
func shellQuote(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// logFile is a container's log: records, one a line, "TIME STREAM TAG
// TEXT", TIME when the text was read in RFC 3339 with nanoseconds (UTC),
// STREAM stdout or stderr, TAG F when TEXT ends a line and P for a partial
// one (a prompt with no newline yet): the kubelet's CRI log format, which
// the provider reads back for timestamps and since. Once the file holds
// max bytes it becomes log.1 (log.1 becomes log.2, ..., up to files - 1
// of them), as the kubelet rotates by containerLogMaxSize and
// containerLogMaxFiles: a container cannot fill the node's disk.
type logFile struct {
	name  string
	max   int64
	files int
	now   func() time.Time

	mu   sync.Mutex
	f    *os.File
	size int64
}

// openLogFile opens (or creates) a container's log for appending.
func openLogFile(name string, max int64, files int) (*logFile, error) {
	l := &logFile{name: name, max: max, files: files, now: time.Now}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *logFile) open() error {
	f, err := os.OpenFile(l.name, os.O_WRONLY|os.O_APPEND|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.size = f, st.Size()
	return nil
}

func (l *logFile) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// copyFrom stamps what r yields, chunk by chunk as read, into the log as
// stream's records, until r ends.
func (l *logFile) copyFrom(r io.Reader, stream string) {
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			l.write(stream, buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// recordTime is TIME's layout: fixed width, so records sort as text too.
const recordTime = "2006-01-02T15:04:05.000000000Z07:00"

// write appends one chunk of a stream as records and rotates the log once
// it reached its bound. A write that fails is dropped: the container's
// output is not held up by its log.
func (l *logFile) write(stream string, chunk []byte) {
	ts := l.now().UTC().Format(recordTime)
	var rec bytes.Buffer
	for len(chunk) > 0 {
		line := chunk
		if i := bytes.IndexByte(chunk, '\n'); i >= 0 {
			line = chunk[:i+1]
		}
		chunk = chunk[len(line):]
		tag := " F "
		if line[len(line)-1] != '\n' {
			tag = " P "
		}
		rec.WriteString(ts + " " + stream + tag)
		rec.Write(line)
		if tag == " P " {
			rec.WriteByte('\n')
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return
	}
	n, _ := l.f.Write(rec.Bytes())
	l.size += int64(n)
	if l.size < l.max {
		return
	}
	for i := l.files - 1; i > 1; i-- {
		_ = os.Rename(l.name+"."+strconv.Itoa(i-1), l.name+"."+strconv.Itoa(i))
	}
	if l.files > 1 {
		_ = os.Rename(l.name, l.name+".1")
	} else {
		_ = os.Remove(l.name)
	}
	l.f.Close()
	l.f = nil
	_ = l.open()
}
