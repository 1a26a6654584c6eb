package mock

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/volume"
)

// session is what a command sees: the container and the client's streams.
type session struct {
	ctx    context.Context
	pod    *podInfo
	env    []corev1.EnvVar
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	tty    bool
	size   *termSize
	domain string
	// mounted finds files in the container's volume mounts.
	mounted func(string) (volume.File, bool)
	// mounts lists the files of the volume mounts.
	mounts func() []string
	// fs holds the files written into the container.
	fs *containerFS
	// devices is DevicesFile's content; empty without devices.
	devices string
	// copyRefused records a refused copy into the container on its pod.
	copyRefused func(message string)
	// shell is set when attaching reaches an interactive shell (see
	// isShell) rather than the container's output.
	shell bool
	// probes are the container's probe scripts, timed from runStart (see
	// probes.go); now is the mock's clock.
	probes   probeScripts
	runStart time.Time
	now      func() time.Time
}

// termSize tracks the latest terminal size of a TTY session.
type termSize struct {
	mu   sync.Mutex
	size api.TermSize
}

func (t *termSize) get() api.TermSize {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.size
}

// RunInContainer runs cmd in the container with a small built-in command set,
// enough for tests and demos:
//
//	echo ARGS...      print ARGS
//	cat               copy stdin to stdout
//	cat /etc/resolv.conf, cat /etc/hostname   the files a kubelet writes for pods
//	cat PATH          a file of a configMap, secret, downwardAPI or projected volume mount, or copied in
//	tar cf - PATH, tar -xmf - [-C DIR]   archive out, extract in (kubectl cp both ways)
//	test -e|-f|-d PATH
//	env, printenv     print the container's (resolved) environment
//	printenv NAME...  print those variables' values; exit 1 if one is unset
//	env CMD...        run CMD
//	hostname          print the pod's name
//	sleep SECONDS     wait
//	true, false       exit 0, exit 1
//	exit N            exit N
//	stty size         print the terminal's rows and columns
//	probe KIND        the outcome scripted for a readiness, liveness or startup probe (see probes.go)
//	sh -c 'CMD; CMD'  run built-in commands in sequence; exit N stops
//
// Anything else exits 127 with "command not found", as a shell would. Exit
// codes reach the client through utilexec.CodeExitError.
func (p *Provider) RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, attach api.AttachIO) error {
	s, err := p.session(ctx, namespace, podName, containerName, attach)
	if err != nil {
		return err
	}
	defer closeStreams(attach)
	if len(cmd) == 0 {
		return errdefs.InvalidInput("no command given")
	}
	if code := s.run(cmd); code != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command %q exited with %d", strings.Join(cmd, " "), code), Code: code}
	}
	return nil
}

func (p *Provider) session(ctx context.Context, namespace, podName, containerName string, attach api.AttachIO) (*session, error) {
	p.mu.Lock()
	ps, c, err := p.lookup(namespace, podName, containerName)
	var env []corev1.EnvVar
	var pod *podInfo
	var mounted func(string) (volume.File, bool)
	var mounts func() []string
	var fs *containerFS
	var devices string
	running, shell := false, false
	var probes probeScripts
	var runStart time.Time
	if err == nil {
		probes = c.script.probes
		if n := len(c.instances); n > 0 {
			runStart = c.instances[n-1].start
		}
		shell = isShell(c)
		env, pod, running = c.spec.env, ps.pod, c.status.State.Running != nil
		if visible, file := ps.containerDevices(c.spec.name); visible != "" {
			env = append(slices.Clip(env), corev1.EnvVar{Name: VisibleDevicesEnv, Value: visible})
			devices = file
		}
		mounted, mounts = p.mountedFiles(ps, c.spec)
		if c.fs == nil {
			c.fs = &containerFS{node: p.copies}
		}
		fs = c.fs
	}
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !running {
		return nil, errNotRunning(c)
	}
	s := &session{ctx: ctx, pod: pod, env: env, stdin: attach.Stdin(), stdout: io.Discard, stderr: io.Discard, tty: attach.TTY(), domain: p.domain, mounted: mounted, mounts: mounts, fs: fs, devices: devices, shell: shell, probes: probes, runStart: runStart, now: p.clock.Now}
	s.copyRefused = func(message string) {
		p.events.warn(pod.namespace, pod.name, pod.uid, ReasonCopyRefused, "kubectl cp refused: "+message)
	}
	if w := attach.Stdout(); w != nil {
		s.stdout = w
	}
	if w := attach.Stderr(); w != nil {
		s.stderr = w
	} else if s.tty {
		s.stderr = s.stdout
	}
	if s.tty && attach.Resize() != nil {
		s.size = &termSize{}
		go func() {
			for size := range attach.Resize() {
				s.size.mu.Lock()
				s.size.size = size
				s.size.mu.Unlock()
			}
		}()
	}
	return s, nil
}

func closeStreams(attach api.AttachIO) {
	if w := attach.Stdout(); w != nil {
		_ = w.Close()
	}
	if w := attach.Stderr(); w != nil {
		_ = w.Close()
	}
}

// run executes one command and returns its exit code.
func (s *session) lookupEnv(name string) (string, bool) {
	for _, e := range s.env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func (s *session) printEnv() {
	for _, e := range s.env {
		fmt.Fprintf(s.stdout, "%s=%s\n", e.Name, e.Value)
	}
}

func (s *session) run(cmd []string) int {
	name, args := cmd[0], cmd[1:]
	switch name {
	case "echo":
		fmt.Fprintln(s.stdout, strings.Join(args, " "))
	case "cat":
		for _, file := range args {
			content, ok, err := s.file(file)
			switch {
			case !ok:
				fmt.Fprintf(s.stderr, "cat: %s: No such file or directory\n", file)
				return 1
			case err != nil:
				fmt.Fprintf(s.stderr, "cat: %v\n", err)
				return 1
			}
			fmt.Fprint(s.stdout, content)
		}
		if len(args) == 0 && s.stdin != nil {
			_, _ = io.Copy(s.stdout, s.stdin)
		}
	case "printenv":
		// Like coreutils: the value of each variable named, exit 1 if any is unset.
		if len(args) == 0 {
			s.printEnv()
			return 0
		}
		code := 0
		for _, name := range args {
			if v, ok := s.lookupEnv(name); ok {
				fmt.Fprintln(s.stdout, v)
			} else {
				code = 1
			}
		}
		return code
	case "env":
		// With arguments, env runs them as a command, in the same environment.
		if len(args) > 0 {
			return s.run(args)
		}
		s.printEnv()
	case "test":
		return s.test(args)
	case "tar":
		return s.tar(args)
	case "hostname":
		fmt.Fprintln(s.stdout, s.pod.name)
	case "probe":
		return s.probe(args)
	case "true":
	case "false":
		return 1
	case "exit":
		return exitArg(args, s.stderr)
	case "sleep":
		if len(args) != 1 {
			fmt.Fprintln(s.stderr, "sleep: missing operand")
			return 1
		}
		secs, err := strconv.ParseFloat(args[0], 64)
		if err != nil || secs < 0 {
			fmt.Fprintf(s.stderr, "sleep: invalid time interval %q\n", args[0])
			return 1
		}
		select {
		case <-time.After(time.Duration(secs * float64(time.Second))):
		case <-s.ctx.Done():
			return 130
		}
	case "stty":
		if len(args) == 1 && args[0] == "size" && s.size != nil {
			size := s.size.get()
			fmt.Fprintf(s.stdout, "%d %d\n", size.Height, size.Width)
			return 0
		}
		fmt.Fprintln(s.stderr, "stty: standard input: Inappropriate ioctl for device")
		return 1
	case "sh", "/bin/sh", "bash", "/bin/bash":
		if len(args) == 2 && args[0] == "-c" {
			return s.script(args[1])
		}
		fmt.Fprintf(s.stderr, "%s: the mock only runs %s -c 'COMMANDS'\n", name, name)
		return 2
	default:
		fmt.Fprintf(s.stderr, "%s: command not found\n", name)
		return 127
	}
	return 0
}

// builtin is the content of the files the mock gives every container.
func (s *session) builtin(name string) (string, bool) {
	switch name {
	case "/etc/hostname":
		return s.pod.name + "\n", true
	case DevicesFile:
		return s.devices, s.devices != ""
	case "/etc/resolv.conf":
		// What the kubelet writes for dnsPolicy ClusterFirst.
		ns, d := s.pod.namespace, s.domain
		return fmt.Sprintf("search %s.svc.%s svc.%s %s\noptions ndots:5\n", ns, d, d, d), true
	}
	return "", false
}

// file returns the content of the few files the mock's containers have,
// and whether name is one. Reading can fail where a kubelet's file could
// not: a service-account token is requested when it is first read.
func (s *session) file(name string) (string, bool, error) {
	if content, ok := s.builtin(name); ok {
		return content, true, nil
	}
	if f, ok := s.fs.read(name); ok {
		return string(f.data), true, nil
	}
	if f, ok := s.mounted(name); ok {
		data, err := f.Read(s.ctx)
		return data, true, err
	}
	return "", false, nil
}

// isFile reports whether name is a file, without reading it.
func (s *session) isFile(name string) bool {
	if _, ok := s.builtin(name); ok {
		return true
	}
	if _, ok := s.fs.read(name); ok {
		return true
	}
	_, ok := s.mounted(name)
	return ok
}

// script runs ';'-separated built-in commands, words split on blanks.
func (s *session) script(text string) int {
	code := 0
	for _, part := range strings.Split(text, ";") {
		words := strings.Fields(part)
		if len(words) == 0 {
			continue
		}
		if words[0] == "exit" {
			return exitArg(words[1:], s.stderr)
		}
		code = s.run(words)
	}
	return code
}

func exitArg(args []string, stderr io.Writer) int {
	if len(args) == 0 {
		return 0
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "exit: %s: numeric argument required\n", args[0])
		return 2
	}
	return n & 0xff
}

// AttachToContainer attaches to the container's main process: its log lines
// as they are written, and, with stdin, every input line echoed back. It
// ends when stdin closes, the container stops or the client goes away.
func (p *Provider) AttachToContainer(ctx context.Context, namespace, podName, containerName string, attach api.AttachIO) error {
	s, err := p.session(ctx, namespace, podName, containerName, attach)
	if err != nil {
		return err
	}
	defer closeStreams(attach)
	if s.shell && s.stdin != nil {
		p.runShell(namespace, podName, containerName, s)
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	logs, err := p.GetContainerLogs(ctx, namespace, podName, containerName, api.ContainerLogOpts{Tail: 0, Follow: true})
	if err != nil {
		return err
	}
	defer logs.Close()

	var mu sync.Mutex // one writer at a time on stdout
	write := func(b []byte) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = s.stdout.Write(b)
	}
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			write(append(sc.Bytes(), '\n'))
		}
	}()
	if s.stdin == nil {
		select {
		case <-logsDone:
		case <-ctx.Done():
		}
		return nil
	}
	sc := bufio.NewScanner(s.stdin)
	for sc.Scan() {
		write(append(sc.Bytes(), '\n'))
	}
	return nil
}

// PortForward connects the stream to an echo server on a port one of the
// pod's containers declares.
func (p *Provider) PortForward(ctx context.Context, namespace, podName string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	p.mu.Lock()
	ps, ok := p.pods[podKey(namespace, podName)]
	declared := false
	if ok {
		for _, c := range ps.containers {
			for _, cp := range c.spec.ports {
				declared = declared || cp.ContainerPort == port
			}
		}
	}
	p.mu.Unlock()
	if !ok {
		return errdefs.NotFoundf("pod %s/%s not found", namespace, podName)
	}
	if !declared {
		return errdefs.NotFoundf("pod %s/%s has no container port %d", namespace, podName, port)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(stream, stream)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}
