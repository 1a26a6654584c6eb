package mock

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// MaxCopiedBytes is how much a container holds of what is copied into it
// (kubectl cp), counting each file's name and data and a tar header block:
// the files live in the daemon's memory.
const MaxCopiedBytes = 64 << 20

// DefaultNodeCopiedBytes is how much the containers of a node hold together
// of what is copied into them, unless the provider config's maxCopiedBytes
// says otherwise: MaxCopiedBytes alone would let a node of many pods fill
// the daemon's memory.
const DefaultNodeCopiedBytes = 256 << 20

// fileOverhead is what a file costs besides its name and data: a tar
// header block, so that a million empty files are not free.
const fileOverhead = 512

// copyBudget is what a node's containers may hold of files copied into
// them, together, counting copies still being read.
type copyBudget struct {
	nodeName string
	max      int64

	mu   sync.Mutex
	held int64
}

// take reserves n bytes, unless that would hold more than max.
func (b *copyBudget) take(name string, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held+n > b.max {
		return fmt.Errorf("%s: node %s holds at most %s copied into its containers (maxCopiedBytes in the provider config), and %s of it is taken",
			name, b.nodeName, bytesQuantity(b.max), bytesQuantity(b.held))
	}
	b.held += n
	return nil
}

func (b *copyBudget) give(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held -= n
}

// bytesQuantity writes n bytes as a quantity: 256Mi, 1536Ki, 1000.
func bytesQuantity(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }

// containerFS holds the files written into a container (kubectl cp into
// it); everything else the container sees is built in or mounted.
type containerFS struct {
	// node is what the node's containers may hold together.
	node *copyBudget

	mu    sync.Mutex
	files map[string]fsFile
	// used is what the files cost, pending what the copies being read
	// have reserved; together at most MaxCopiedBytes.
	used, pending int64
	// gone is set once the container's pod is gone: its files are given
	// back to the node, and a copy still being read is dropped.
	gone bool
}

type fsFile struct {
	data []byte
	mode int64
}

func fileCost(name string, size int64) int64 { return int64(len(name)) + size + fileOverhead }

// reservation is the room a copy of one file holds while it is read.
type reservation struct {
	name string
	cost int64
}

// reserve makes room for a file of size bytes, before it is read: a copy
// past the container's MaxCopiedBytes or the node's budget is refused
// without being buffered. A file it replaces counts for the container (it
// goes once the copy is in) but not for the node, which holds both while
// the new one is read.
func (f *containerFS) reserve(name string, size int64) (reservation, error) {
	r := reservation{name: name, cost: fileCost(name, size)}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone {
		return r, errPodGone(name)
	}
	replaced := int64(0)
	if old, ok := f.files[name]; ok {
		replaced = fileCost(name, int64(len(old.data)))
	}
	if f.used+f.pending-replaced+r.cost > MaxCopiedBytes {
		return r, errCopyLimit(name)
	}
	if err := f.node.take(name, r.cost); err != nil {
		return r, err
	}
	f.pending += r.cost
	return r, nil
}

// commit stores the file r made room for; the file it replaces, if any,
// is given back.
func (f *containerFS) commit(r reservation, data []byte, mode int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending -= r.cost
	if f.gone {
		f.node.give(r.cost)
		return errPodGone(r.name)
	}
	if old, ok := f.files[r.name]; ok {
		cost := fileCost(r.name, int64(len(old.data)))
		f.used -= cost
		f.node.give(cost)
	}
	if f.files == nil {
		f.files = map[string]fsFile{}
	}
	f.files[r.name] = fsFile{data: data, mode: mode}
	f.used += r.cost
	return nil
}

// cancel gives back the room of a copy that was not read through.
func (f *containerFS) cancel(r reservation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending -= r.cost
	f.node.give(r.cost)
}

// release drops the files, the container's pod being gone, and gives the
// node back what they held.
func (f *containerFS) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gone = true
	f.node.give(f.used)
	f.used, f.files = 0, nil
}

// releaseFiles drops the files copied into the pod's containers; p.mu must
// be held, and the pod is gone.
func (ps *podState) releaseFiles() {
	for _, c := range ps.all() {
		if c.fs != nil {
			c.fs.release()
		}
	}
}

func errCopyLimit(name string) error {
	return fmt.Errorf("%s: the mock holds at most %d MiB copied into a container", name, MaxCopiedBytes>>20)
}

func errPodGone(name string) error { return fmt.Errorf("%s: the container's pod is gone", name) }

func (f *containerFS) read(name string) (fsFile, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	file, ok := f.files[name]
	return file, ok
}

func (f *containerFS) names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.files))
	for name := range f.files {
		out = append(out, name)
	}
	return out
}

// tree lists every file the session's container has: written, mounted
// and built in, by absolute path.
func (s *session) tree() []string {
	names := append(s.fs.names(), "/etc/hostname", "/etc/resolv.conf")
	names = append(names, s.mountedNames()...)
	sort.Strings(names)
	return names
}

// isDir reports whether name is a directory: one holding some file.
func (s *session) isDir(name string) bool {
	name = path.Clean(name)
	if name == "/" {
		return true
	}
	for _, f := range s.tree() {
		if strings.HasPrefix(f, name+"/") {
			return true
		}
	}
	return false
}

// fileMode is a file's permission bits (0644 for the built-in ones).
func (s *session) fileMode(name string) int64 {
	if f, ok := s.fs.read(name); ok {
		return f.mode
	}
	if f, ok := s.mounted(name); ok {
		return int64(f.Mode)
	}
	return 0o644
}

// test implements test -e, -f and -d PATH.
func (s *session) test(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(s.stderr, "test: the mock supports test -e|-f|-d PATH")
		return 2
	}
	isFile := s.isFile(path.Clean(args[1]))
	isDir := s.isDir(args[1])
	ok := false
	switch args[0] {
	case "-e":
		ok = isFile || isDir
	case "-f":
		ok = isFile
	case "-d":
		ok = isDir
	default:
		fmt.Fprintf(s.stderr, "test: unsupported operator %s\n", args[0])
		return 2
	}
	if ok {
		return 0
	}
	return 1
}

// tar implements what kubectl cp runs: "tar cf - PATH" writes PATH (a file
// or a directory) as an archive to stdout, with names relative to /;
// "tar -xmf - [-C DIR]" extracts stdin's archive into the container.
func (s *session) tar(args []string) int {
	var mode, dir string
	var rest []string
	for i := 0; i < len(args); i++ {
		switch a := strings.TrimPrefix(args[i], "-"); {
		case a == "cf" || a == "xf" || a == "xmf":
			mode = a[:1]
		case a == "C" && i+1 < len(args):
			dir = args[i+1]
			i++
		case strings.HasPrefix(args[i], "--no-same-"):
		default:
			rest = append(rest, args[i])
		}
	}
	switch {
	case mode == "c" && len(rest) == 2 && rest[0] == "-":
		return s.tarCreate(rest[1])
	case mode == "x" && len(rest) == 1 && rest[0] == "-":
		return s.tarExtract(dir)
	}
	fmt.Fprintln(s.stderr, "tar: the mock supports tar cf - PATH and tar -xmf - [-C DIR]")
	return 2
}

func (s *session) tarCreate(name string) int {
	name = path.Join("/", name)
	var files []string
	if s.isFile(name) {
		files = []string{name}
	} else {
		for _, f := range s.tree() {
			if strings.HasPrefix(f, strings.TrimSuffix(name, "/")+"/") {
				files = append(files, f)
			}
		}
	}
	if len(files) == 0 {
		fmt.Fprintf(s.stderr, "tar: %s: Cannot stat: No such file or directory\n", name)
		return 2
	}
	tw := tar.NewWriter(s.stdout)
	for _, f := range files {
		data, _, err := s.file(f)
		if err != nil {
			fmt.Fprintf(s.stderr, "tar: %v\n", err)
			return 2
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f, "/"), Mode: s.fileMode(f), Size: int64(len(data)), ModTime: time.Now()}
		if err := tw.WriteHeader(hdr); err != nil {
			return 2
		}
		if _, err := io.WriteString(tw, data); err != nil {
			return 2
		}
	}
	if err := tw.Close(); err != nil {
		return 2
	}
	return 0
}

func (s *session) tarExtract(dir string) int {
	if s.stdin == nil {
		fmt.Fprintln(s.stderr, "tar: no input")
		return 2
	}
	dir = path.Join("/", dir)
	tr := tar.NewReader(s.stdin)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Fprintf(s.stderr, "tar: %v\n", err)
			return 2
		}
		if hdr.Typeflag != tar.TypeReg {
			continue // directories are implied by their files
		}
		name := path.Join(dir, hdr.Name) //nolint:gosec // G305: a path in the mock's in-memory file system, never the host's
		// Refused before reading: a 1 GiB copy is never buffered. The rest
		// is read and dropped, as tar does: a session that ended with
		// input unread would be reset, losing the message on its way.
		r, err := s.fs.reserve(name, hdr.Size)
		if err != nil {
			fmt.Fprintf(s.stderr, "tar: %v\n", err)
			s.copyRefused(err.Error())
			_, _ = io.Copy(io.Discard, s.stdin)
			return 2
		}
		var data bytes.Buffer
		if _, err := io.Copy(&data, tr); err != nil { //nolint:gosec // G110: tar is not compressed, and reserve bounded hdr.Size
			s.fs.cancel(r)
			fmt.Fprintf(s.stderr, "tar: %v\n", err)
			return 2
		}
		if err := s.fs.commit(r, data.Bytes(), hdr.Mode&0o7777); err != nil {
			fmt.Fprintf(s.stderr, "tar: %v\n", err)
			return 2
		}
	}
	_, _ = io.Copy(io.Discard, s.stdin)
	return 0
}

// mountedNames lists the files of the session's volume mounts.
func (s *session) mountedNames() []string {
	if s.mounts == nil {
		return nil
	}
	return s.mounts()
}
