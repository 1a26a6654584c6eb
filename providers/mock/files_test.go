package mock

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"
)

func TestTarInAndOut(t *testing.T) {
	p, _ := newProvider(t)
	ctx := context.Background()
	if err := p.CreatePod(ctx, testPod("web", nil, corev1.RestartPolicyAlways)); err != nil {
		t.Fatal(err)
	}
	exec := func(stdin io.Reader, cmd ...string) (string, error) {
		out := &closeBuffer{}
		err := p.RunInContainer(ctx, "ns", "web", "app", cmd, &fakeIO{stdin: stdin, stdout: out, stderr: &closeBuffer{}})
		return out.String(), err
	}

	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	for name, data := range map[string]string{"data/a.txt": "alpha", "data/sub/b.txt": "beta"} {
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, Size: int64(len(data))})
		_, _ = tw.Write([]byte(data))
	}
	_ = tw.Close()
	if _, err := exec(&archive, "tar", "-xmf", "-", "-C", "/srv"); err != nil {
		t.Fatal(err)
	}
	if out, err := exec(nil, "cat", "/srv/data/sub/b.txt"); err != nil || out != "beta" {
		t.Errorf("extracted file: %q %v", out, err)
	}
	if _, err := exec(nil, "test", "-d", "/srv/data"); err != nil {
		t.Errorf("test -d on a directory: %v", err)
	}
	if _, err := exec(nil, "test", "-d", "/srv/data/a.txt"); err == nil {
		t.Error("test -d on a file succeeded")
	}

	out, err := exec(nil, "tar", "cf", "-", "/srv/data")
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader([]byte(out)))
	got := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		data, _ := io.ReadAll(tr)
		got[hdr.Name] = string(data)
		if hdr.Mode != 0o600 {
			t.Errorf("%s mode %o", hdr.Name, hdr.Mode)
		}
	}
	if len(got) != 2 || got["srv/data/a.txt"] != "alpha" || got["srv/data/sub/b.txt"] != "beta" {
		t.Errorf("archive out: %v", got)
	}
	if _, err := exec(nil, "tar", "cf", "-", "/nope"); err == nil {
		t.Error("archiving a missing path succeeded")
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// tarStream is an archive of one file of size zero bytes, made as it is
// read, so a test can offer a gigabyte without holding it.
func tarStream(name string, size int64) *io.PipeReader {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size}); err != nil {
			pw.CloseWithError(err)
			return
		}
		if _, err := io.CopyN(tw, zeros{}, size); err != nil {
			pw.CloseWithError(err)
			return
		}
		pw.CloseWithError(tw.Close())
	}()
	return pr
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// TestCopyIntoContainerIsCapped: kubectl cp of 1 GiB into a container is
// refused with a clear error before the mock reads it, and the files of a
// container never cost more than MaxCopiedBytes.
func TestCopyIntoContainerIsCapped(t *testing.T) {
	p, _ := newProvider(t)
	ctx := context.Background()
	if err := p.CreatePod(ctx, testPod("web", nil, corev1.RestartPolicyAlways)); err != nil {
		t.Fatal(err)
	}
	extract := func(stdin io.Reader) (string, error) {
		stderr := &closeBuffer{}
		err := p.RunInContainer(ctx, "ns", "web", "app", []string{"tar", "-xmf", "-", "-C", "/srv"}, &fakeIO{stdin: stdin, stdout: &closeBuffer{}, stderr: stderr})
		return stderr.String(), err
	}

	huge := tarStream("huge.bin", 1<<30)
	defer huge.Close()
	in := &countingReader{r: huge}
	stderr, err := extract(in)
	want := fmt.Sprintf("tar: /srv/huge.bin: the mock holds at most %d MiB copied into a container\n", MaxCopiedBytes>>20)
	if exit, ok := err.(utilexec.CodeExitError); !ok || exit.Code != 2 || stderr != want {
		t.Errorf("1 GiB copy: %v, stderr %q, want exit 2 and %q", err, stderr, want)
	}
	// Refused from the header, then read through without being kept.
	if in.n < 1<<30 {
		t.Errorf("the refused copy read %d bytes of its input, want it drained", in.n)
	}
	p.mu.Lock()
	fs := p.pods[podKey("ns", "web")].containers[0].fs
	p.mu.Unlock()
	if used, pending, held := fs.holds(); used != 0 || pending != 0 || held != 0 {
		t.Errorf("after the refused copy the container holds %d bytes and reserves %d, the node %d; want none", used, pending, held)
	}

	// Files fill the container up to the cap; replacing one frees what it
	// held.
	half := int64(MaxCopiedBytes/2 - 4096)
	for _, name := range []string{"a.bin", "b.bin"} {
		if stderr, err := extract(tarStream(name, half)); err != nil {
			t.Fatalf("%s: %v %q", name, err, stderr)
		}
	}
	if stderr, err := extract(tarStream("c.bin", 8192)); err == nil || !strings.Contains(stderr, "/srv/c.bin: the mock holds at most") {
		t.Errorf("a copy past the cap: %v %q", err, stderr)
	}
	if stderr, err := extract(tarStream("a.bin", half)); err != nil {
		t.Errorf("replacing a file: %v %q", err, stderr)
	}
}
