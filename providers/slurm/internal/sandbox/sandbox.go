// Package sandbox is the program of a Slurm job of the slurm provider
// (virtual-kubelet-slurm-container): it runs the pod's containers, each
// under bubblewrap, stamps their output into their logs and records their
// exit codes (see Job). Every job runs it, so it imports nothing beyond the
// standard library, x/sys and filepath-securejoin: it starts in about a
// millisecond, where the daemon's binary spends a tenth of a second of CPU
// in its packages' initialisation. It also holds the bounded, symlink-
// refusing reads of a pod directory that the daemon shares with it.
package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"golang.org/x/sys/unix"
)

// JobPath is the PATH of sbatch, of the jobs it submits and of the
// containers.
const JobPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// containerName is what a container name must look like to be a directory.
var containerName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ValidContainerName reports whether name can be a container's directory.
func ValidContainerName(name string) bool { return containerName.MatchString(name) }

// Main runs the launcher's command line and returns its exit code:
//
//	job POD_DIR BWRAP              the pod's job: see Job
//	container POD_DIR NAME BWRAP   one container: see ExecContainer
//
// An error is written to standard error.
func Main(args []string) int {
	var err error
	switch {
	case len(args) == 3 && args[0] == "job":
		var code int
		if code, err = Job(args[1], args[2]); err == nil {
			return code
		}
	case len(args) == 4 && args[0] == "container":
		err = ExecContainer(args[1], args[2], args[3])
	default:
		err = fmt.Errorf("want job POD_DIR BWRAP or container POD_DIR NAME BWRAP, got %q", args)
	}
	fmt.Fprintf(os.Stderr, "virtual-kubelet-slurm-container: %v\n", err)
	return 1
}

// ExecContainer reads the container's plan from the pod directory, resolves
// every bind source beneath the pod directory at that moment, and replaces
// the process with bubblewrap, whose --info-fd is descriptor 3. It returns
// only on an error. The job runs it under script(1) for a container with a
// terminal of its own; it starts the others itself (see Job).
//
// The container gets new user, PID, IPC, UTS and cgroup namespaces, no
// capabilities, a /proc of its own PID namespace, a minimal /dev, and of
// the file system only its image's root (or the host paths the config
// allows, read-only, less the hidden ones), its volumes and its /tmp. It
// keeps the node's network, which jobs need for MPI.
func ExecContainer(podDir, name, bwrap string) error {
	argv, keep, err := Args(podDir, name, bwrap, keepFD)
	if err != nil {
		return fmt.Errorf("container %s: %w", name, err)
	}
	// Bubblewrap finds the descriptors at keepFD on: each is first copied
	// above them all, so that no move overwrites one not yet moved.
	high := make([]int, len(keep))
	for i, f := range keep {
		if high[i], err = unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, keepFD+len(keep)); err != nil {
			return err
		}
	}
	for i, fd := range high {
		// Without close-on-exec: bubblewrap gets them.
		if err := unix.Dup3(fd, keepFD+i, 0); err != nil {
			return err
		}
	}
	return unix.Exec(bwrap, argv, []string{JobPath})
}

// keepFD is the first descriptor bubblewrap's argv names: 0-2 are the
// standard streams and 3 its --info-fd.
const keepFD = 4

// Args builds bubblewrap's argv for the container and returns the files
// the argv names by descriptor: keep[i] as firstFD+i, where bubblewrap
// must find it.
func Args(podDir, name, bwrap string, firstFD int) (argv []string, keep []*os.File, err error) {
	if !ValidContainerName(name) {
		return nil, nil, fmt.Errorf("%q is not a container name", name)
	}
	read := func(elem ...string) (string, error) {
		data, err := ReadPodFile(podDir, elem...)
		return string(data), err
	}
	readList := func(elem ...string) ([]string, error) {
		data, err := ReadPodFile(podDir, elem...)
		return NulFields(data), err
	}
	c := filepath.Join("c", name)
	var root, wd, tty, hostname string
	var cmd, env, mounts, hostPaths, hidden []string
	for _, r := range []struct {
		s    *string
		l    *[]string
		elem []string
	}{
		{s: &root, elem: []string{c, "root"}}, {s: &wd, elem: []string{c, "workdir"}}, {s: &tty, elem: []string{c, "tty"}},
		{s: &hostname, elem: []string{"hostname"}},
		{l: &cmd, elem: []string{c, "argv"}}, {l: &env, elem: []string{c, "env"}}, {l: &mounts, elem: []string{c, "mounts"}},
		{l: &hostPaths, elem: []string{"hostpaths"}}, {l: &hidden, elem: []string{"hidden"}},
	} {
		var err error
		if r.s != nil {
			*r.s, err = read(r.elem...)
		} else {
			*r.l, err = readList(r.elem...)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if len(cmd) == 0 || len(mounts)%4 != 0 {
		return nil, nil, errors.New("the plan in the pod directory is incomplete")
	}
	gpus, err := containerGPUs(podDir, name, os.Getenv(JobGPUsEnv))
	if err != nil {
		return nil, nil, err
	}
	env = append(env, gpuEnv(gpus)...)
	// The pod directory itself: its parent is the daemon's, so it cannot
	// be swapped; what is inside is the tenant's, so everything below is
	// opened beneath it.
	pod, err := os.OpenFile(podDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	defer pod.Close()
	defer func() {
		if err != nil {
			for _, f := range keep {
				f.Close()
			}
		}
	}()
	beneath := func(base *os.File, rel string) (*os.File, error) {
		f, err := pathrs.OpenatInRoot(base, rel)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
		keep = append(keep, f)
		return f, nil
	}
	// The descriptor f will be in bubblewrap, once appended to keep.
	fd := func(f *os.File) string {
		return strconv.Itoa(firstFD + slices.Index(keep, f))
	}

	// --as-pid-1: the container's process is PID 1 of its namespace, as
	// in a container runtime, so the TERM of a graceful delete reaches it
	// (Job signals bwrap's child) and not a reaper that ignores it.
	argv = []string{bwrap,
		"--unshare-user", "--unshare-pid", "--as-pid-1", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup",
		"--cap-drop", "ALL", "--die-with-parent", "--hostname", hostname, "--info-fd", "3"}
	if tty != "yes" {
		// A container on a terminal keeps it (its own, made by script(1)).
		argv = append(argv, "--new-session")
	}
	dests := []string{"/proc", "/dev", "/tmp"}
	for i := 0; i+3 < len(mounts); i += 4 {
		dests = append(dests, mounts[i+2])
	}
	if root != "" {
		entries, err := os.ReadDir(root)
		if err != nil {
			return nil, nil, err
		}
		var binds []bindEntry
		for _, e := range entries {
			binds = append(binds, bindEntry{src: filepath.Join(root, e.Name()), dst: "/" + e.Name()})
		}
		argv = bindTree(argv, binds, dests)
	} else {
		var binds []bindEntry
		for _, p := range hostPaths {
			binds = append(binds, bindEntry{src: p, dst: p})
		}
		argv = bindTree(argv, binds, dests)
		argv = hide(argv, hostPaths, hidden)
	}
	argv = append(argv, "--proc", "/proc")
	argv = appendDev(argv)
	if argv, err = appendGPUFiles(argv, podDir, gpus); err != nil {
		return nil, nil, err
	}
	tmp, err := beneath(pod, "tmp")
	if err != nil {
		return nil, nil, err
	}
	argv = append(argv, "--bind-fd", fd(tmp), "/tmp")
	for i := 0; i+3 < len(mounts); i += 4 {
		vol, sub, dst, mode := mounts[i], mounts[i+1], mounts[i+2], mounts[i+3]
		if mode == "tmpfs" {
			argv = append(argv, "--tmpfs", dst)
			continue
		}
		// The subPath is resolved beneath the volume, at this moment, by
		// the kernel (openat2 RESOLVE_IN_ROOT where it has it): a symlink
		// an init container left in an emptyDir resolves inside it.
		src, err := beneath(pod, vol)
		if err != nil {
			return nil, nil, err
		}
		if sub != "" {
			if src, err = beneath(src, sub); err != nil {
				return nil, nil, err
			}
		}
		flag := "--ro-bind-fd"
		if mode == "rw" {
			flag = "--bind-fd"
		}
		argv = append(argv, flag, fd(src), dst)
	}
	if wd != "" {
		argv = append(argv, "--chdir", wd)
	}
	// The environment reaches bubblewrap through a memory file, never its
	// argv: ps shows every process's arguments to every user.
	envArgs, err := envFile(env)
	if err != nil {
		return nil, nil, err
	}
	keep = append(keep, envArgs)
	argv = append(argv, "--clearenv", "--args", fd(envArgs), "--")
	return append(argv, cmd...), keep, nil
}

// bindEntry is a host path bound read-only into a container.
type bindEntry struct{ src, dst string }

// bindTree adds read-only binds of entries to argv, descending into a
// directory that holds a mount destination so that bubblewrap makes that
// mount point on its own root, never inside a host directory. A symlink is
// recreated as one.
func bindTree(argv []string, entries []bindEntry, dests []string) []string {
	for _, e := range entries {
		switch e.dst {
		case "/proc", "/dev", "/tmp":
			continue
		}
		st, err := os.Lstat(e.src)
		if err != nil {
			continue
		}
		covered, descend := false, false
		for _, d := range dests {
			covered = covered || d == e.dst
			descend = descend || under(e.dst, d)
		}
		switch {
		case covered:
		case st.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(e.src); err == nil {
				argv = append(argv, "--symlink", target, e.dst)
			}
		case descend && st.IsDir():
			children, err := os.ReadDir(e.src)
			if err != nil {
				continue
			}
			var sub []bindEntry
			for _, c := range children {
				sub = append(sub, bindEntry{src: filepath.Join(e.src, c.Name()), dst: filepath.Join(e.dst, c.Name())})
			}
			argv = bindTree(argv, sub, dests)
		default:
			argv = append(argv, "--ro-bind", e.src, e.dst)
		}
	}
	return argv
}

// under reports whether p lies strictly beneath dir.
func under(dir, p string) bool { return strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/") }

// hide masks the hidden paths that lie beneath a bound host path: an empty
// tmpfs over a directory, /dev/null over a file.
func hide(argv, hostPaths, hidden []string) []string {
	for _, h := range hidden {
		if !slices.ContainsFunc(hostPaths, func(p string) bool { return p == h || under(p, h) }) {
			continue
		}
		st, err := os.Lstat(h)
		switch {
		case err != nil:
		case st.IsDir():
			argv = append(argv, "--tmpfs", h)
		case st.Mode().IsRegular():
			argv = append(argv, "--ro-bind", "/dev/null", h)
		}
	}
	return argv
}

// appendDev gives the container a /dev of the harmless devices only. Not
// bubblewrap's --dev: mounting a devpts needs root in the first user
// namespace, and bubblewrap then nests a second one, which keeps exec
// (nsenter, as the tenant) out of the container's mount namespace.
func appendDev(argv []string) []string {
	argv = append(argv, "--tmpfs", "/dev")
	for _, d := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		argv = append(argv, "--dev-bind", "/dev/"+d, "/dev/"+d)
	}
	for _, l := range [][2]string{{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}} {
		argv = append(argv, "--symlink", l[0], "/dev/"+l[1])
	}
	return append(argv, "--tmpfs", "/dev/shm")
}

// envFile is a memory file of bubblewrap --setenv arguments, NUL-separated,
// for --args.
func envFile(env []string) (*os.File, error) {
	fd, err := unix.MemfdCreate("container-env", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "container-env")
	var b strings.Builder
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		b.WriteString("--setenv\x00" + k + "\x00" + v + "\x00")
	}
	_, err = f.WriteString(b.String())
	if err == nil {
		_, err = f.Seek(0, 0)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// OpenRegular opens a file for reading without following a symlink in its
// last component and without waiting on a fifo or a device, and refuses
// anything but a regular file.
func OpenRegular(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file (%s)", name, st.Mode().Type())
	}
	return f, nil
}

// ReadRegular reads a regular file (see OpenRegular) of at most limit
// bytes; a larger one is an error.
func ReadRegular(name string, limit int64) ([]byte, error) {
	f, err := OpenRegular(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(data)) > limit {
		// A cut file would be read as another plan or record.
		err = fmt.Errorf("%s: larger than %d bytes", name, limit)
	}
	return data, err
}

// ReadPodFile reads a small file (at most 1 MiB) of a pod's directory.
func ReadPodFile(dir string, elem ...string) ([]byte, error) {
	return ReadRegular(filepath.Join(append([]string{dir}, elem...)...), 1<<20)
}

// NulFields splits a NUL-terminated list.
func NulFields(data []byte) []string {
	s := strings.TrimSuffix(string(data), "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}
