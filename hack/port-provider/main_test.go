package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/testing/gomodfile"
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
		{"generic advice", "package p\nimport _ \"PRIOR/internal/queue\"\n", noEquivalent},
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

const priorGoMod = `module example.com/p

go 1.24

require (
	PRIOR v1.11.0
	k8s.io/api v0.36.3
)

replace PRIOR => ../vk-fork
`

func TestRewriteModReplacesTheRequirement(t *testing.T) {
	dir := t.TempDir()
	checkout := filepath.Join(filepath.Dir(dir), "vk")
	file := filepath.Join(dir, "go.mod")
	out, changes, notes, err := rewriteMod(file, []byte(priorSource(priorGoMod)), modTarget{version: replacedVersion, dir: checkout})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		ourModule + " " + replacedVersion,
		"k8s.io/api v0.36.3",
		"replace " + ourModule + " => ../vk\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("go.mod lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), priorModule) {
		t.Errorf("go.mod still names %s:\n%s", priorModule, out)
	}
	if len(changes) != 2 || changes[0].line != 6 || changes[0].from != "require "+priorModule+" v1.11.0" || changes[1].to != "replace "+ourModule+" => ../vk" || changes[1].line == 0 {
		t.Errorf("changes = %+v", changes)
	}
	if len(notes) != 1 || notes[0].line != 10 || !strings.Contains(notes[0].text, "../vk-fork") {
		t.Errorf("notes = %+v, want the dropped replace at line 10", notes)
	}
}

func TestRewriteModVersionOrAdvice(t *testing.T) {
	src := []byte(priorSource(priorGoMod))
	out, changes, _, err := rewriteMod("go.mod", src, modTarget{version: "v0.2.0"})
	if err != nil || len(changes) != 1 || !strings.Contains(string(out), ourModule+" v0.2.0") || strings.Contains(string(out), "replace") {
		t.Errorf("-version: err %v, changes %+v, go.mod:\n%s", err, changes, out)
	}
	out, changes, notes, err := rewriteMod("go.mod", src, modTarget{})
	if err != nil || len(changes) != 0 || len(notes) != 2 || notes[0].line != 6 || !strings.Contains(notes[0].text, "go get "+ourModule+"@VERSION") {
		t.Errorf("no target: err %v, changes %+v, notes %+v", err, changes, notes)
	}
	if strings.Contains(string(out), priorModule) {
		t.Errorf("no target: go.mod still names %s:\n%s", priorModule, out)
	}
	unrelated := []byte("module example.com/q\n\ngo 1.24\n")
	if out, changes, notes, err := rewriteMod("go.mod", unrelated, modTarget{version: "v0.2.0"}); err != nil || string(out) != string(unrelated) || changes != nil || notes != nil {
		t.Errorf("a go.mod without the prior module must be left alone: %v %+v %+v\n%s", err, changes, notes, out)
	}
}

func TestModTargetFlags(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := modTargetOf("", root); err != nil || got.dir != root || got.version != replacedVersion {
		t.Errorf("-replace %s: %+v, %v", root, got, err)
	}
	for _, tc := range []struct{ version, replace, want string }{
		{"v0.1.0", root, "cannot be used together"},
		{"1.0", "", "not a canonical semantic version"},
		{"", t.TempDir(), "not a checkout of"},
		{"", filepath.Join(root, "hack/port-provider/testdata/provider"), "not a checkout of"},
	} {
		if _, err := modTargetOf(tc.version, tc.replace); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("-version %q -replace %q: %v, want an error containing %q", tc.version, tc.replace, err, tc.want)
		}
	}
}

// TestMigratingTableMatchesPaths: MIGRATING.md's path table has one row
// per entry of the tool's table, and no other.
func TestMigratingTableMatchesPaths(t *testing.T) {
	doc, err := os.ReadFile("../../MIGRATING.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for line := range strings.Lines(string(doc)) {
		if strings.HasPrefix(line, "| `"+priorModule) {
			rows++
		}
	}
	for from, to := range paths {
		if row := "| `" + from + "` | `" + to + "` |"; !strings.Contains(string(doc), row) {
			t.Errorf("MIGRATING.md lacks the row %s", row)
		}
	}
	if rows != len(paths) {
		t.Errorf("MIGRATING.md has %d rows of prior packages, the tool maps %d", rows, len(paths))
	}
}

// TestFixtureRequiresOurVersions: the provider the e2e test ports requires
// each module at the version this module does. A version of its own
// (newer, so chosen) would make its build compile the packages above that
// module a second time, with -race: minutes on a fresh machine, and
// downloads this module's go.sum does not cover.
func TestFixtureRequiresOurVersions(t *testing.T) {
	ours := gomodfile.Versions(t, "../../go.mod")
	for _, r := range gomodfile.Parse(t, "testdata/provider/go.mod.txt").Require {
		if r.Mod.Path == priorModule {
			continue
		}
		if want, ok := ours[r.Mod.Path]; !ok || r.Mod.Version != want {
			t.Errorf("testdata/provider/go.mod.txt requires %s %s; go.mod requires %q", r.Mod.Path, r.Mod.Version, want)
		}
	}
}
