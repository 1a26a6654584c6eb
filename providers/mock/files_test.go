package mock

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
