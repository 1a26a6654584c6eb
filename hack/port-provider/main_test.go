package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// priorSource is src with PRIOR standing for the prior project's module
// path: no Go file of ours imports that module, not even a test's string.
func priorSource(src string) string { return strings.ReplaceAll(src, "PRIOR", priorModule) }

func TestRewriteKeepsNamesAndComments(t *testing.T) {
	src := priorSource(`package p

import (
	"context"

	vklog "PRIOR/log" // the logger
	"PRIOR/errdefs"
)

func f(ctx context.Context) error { vklog.G(ctx).Info("x"); return errdefs.NotFound("y") }
`)
	out, changes, err := rewrite("p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`vklog "github.com/vkubelet/virtual-kubelet/node/log" // the logger`,
		`"github.com/vkubelet/virtual-kubelet/node/errdefs"`,
		`vklog.G(ctx).Info("x")`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	if len(changes) != 2 || changes[0].line != 6 || changes[1].to != ourModule+"/node/errdefs" {
		t.Errorf("changes = %+v", changes)
	}
}

func TestRewriteRefusesWhatItCannotMap(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"no equivalent", "package p\nimport _ \"PRIOR/providers\"\n",
			`p.go:2: import "PRIOR/providers" has no equivalent`},
		{"hint", "package p\nimport _ \"PRIOR/log/logrus\"\n", "log.FromLogrus"},
		{"syntax error", "package p\nfunc {", "p.go:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := rewrite("p.go", []byte(priorSource(tc.src)))
			if want := priorSource(tc.want); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("err = %v, want one containing %q", err, want)
			}
		})
	}
}

func TestRunModes(t *testing.T) {
	dir := t.TempDir()
	prior := priorSource("package p\n\nimport \"PRIOR/node\"\n\nvar _ node.PodLifecycleHandler\n")
	other := "package p\n\nimport \"fmt\"\n\nvar _ = fmt.Sprint\n"
	for name, src := range map[string]string{"a.go": prior, "b.go": other, "vendor/v.go": prior} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-l", dir}, &stdout, &stderr); code != 0 || strings.TrimSpace(stdout.String()) != filepath.Join(dir, "a.go") {
		t.Errorf("-l: exit %d, listed %q, stderr %s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := run([]string{filepath.Join(dir, "a.go")}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), `"github.com/vkubelet/virtual-kubelet/node"`) {
		t.Errorf("stdout mode: exit %d, output %q", code, stdout.String())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.go")); string(b) != prior {
		t.Error("stdout mode must not write the file")
	}
	if code := run([]string{"-w", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("-w: exit %d: %s", code, stderr.String())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.go")); !strings.Contains(string(b), ourModule+"/node") {
		t.Errorf("-w did not rewrite a.go:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "vendor/v.go")); string(b) != prior {
		t.Error("-w must skip vendor")
	}
	for _, args := range [][]string{{}, {"-w", "-l", dir}, {filepath.Join(dir, "missing")}} {
		stderr.Reset()
		if code := run(args, &stdout, &stderr); code == 0 || stderr.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q: want a failure with a message", args, code, stderr.String())
		}
	}
}
