package main

import (
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// FuzzRewriteMod: whatever go.mod a provider's author has, rewriteMod does
// not panic; what it writes parses, names the prior module nowhere, requires
// ours at the version asked for (replaced by the checkout when one is
// given) if it required the prior one, and leaves a go.mod without the
// prior module byte for byte alone. "PRIOR" in the input stands for the
// prior module's path, so that the fuzzer need not find it.
func FuzzRewriteMod(f *testing.F) {
	for _, seed := range []string{
		priorGoMod,
		"module example.com/p\n\nrequire PRIOR v1.2.0\n",
		"module example.com/p\n\nrequire PRIOR v1.2.0 // indirect\nrequire PRIOR v1.3.0\n",
		"module example.com/p\n\nreplace PRIOR v1.2.0 => example.com/fork v1.2.1\nreplace PRIOR => ./vk\n",
		"module example.com/p\n\nrequire (\n\t" + ourModule + " v0.1.0\n\tPRIOR v1.11.0\n)\n",
		"module example.com/p\n\ngo 1.24\n",
		"module example.com/p\nrequire PRIOR\n",
		"require (",
		"",
	} {
		for mode := range byte(3) {
			f.Add(seed, mode)
		}
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, src string, mode byte) {
		src = priorSource(src)
		var to modTarget
		switch mode % 3 {
		case 1:
			to.version = "v0.2.0"
		case 2:
			to = modTarget{version: replacedVersion, dir: filepath.Join(filepath.Dir(dir), "vk")}
		}
		file := filepath.Join(dir, "go.mod")
		out, changes, notes, err := rewriteMod(file, []byte(src), to)
		if err != nil {
			return
		}
		in, _ := modfile.Parse(file, []byte(src), nil)
		required := false
		for _, r := range in.Require {
			required = required || r.Mod.Path == priorModule
		}
		mentioned := required
		for _, r := range in.Replace {
			mentioned = mentioned || r.Old.Path == priorModule
		}
		if !mentioned {
			if string(out) != src || changes != nil || notes != nil {
				t.Fatalf("a go.mod without the prior module was changed: %+v %+v\n%s", changes, notes, out)
			}
			return
		}
		g, err := modfile.Parse(file, out, nil)
		if err != nil {
			t.Fatalf("the rewritten go.mod does not parse: %v\n%s", err, out)
		}
		for _, r := range g.Require {
			if r.Mod.Path == priorModule {
				t.Fatalf("the rewritten go.mod still requires %s:\n%s", priorModule, out)
			}
		}
		for _, r := range g.Replace {
			if r.Old.Path == priorModule {
				t.Fatalf("the rewritten go.mod still replaces %s:\n%s", priorModule, out)
			}
		}
		var ours, replaced string
		for _, r := range g.Require {
			if r.Mod.Path == ourModule {
				ours = r.Mod.Version
			}
		}
		for _, r := range g.Replace {
			if r.Old.Path == ourModule {
				replaced = r.New.Path
			}
		}
		if required && to.version != "" && ours != to.version {
			t.Fatalf("the rewritten go.mod requires %s at %q, want %s:\n%s", ourModule, ours, to.version, out)
		}
		if required && to.dir != "" && replaced != "../vk" {
			t.Fatalf("the rewritten go.mod replaces %s by %q, want ../vk:\n%s", ourModule, replaced, out)
		}
		for _, c := range changes {
			if c.line <= 0 {
				t.Fatalf("change %+v has no line", c)
			}
		}
		for _, n := range notes {
			if n.line <= 0 || strings.TrimSpace(n.text) == "" {
				t.Fatalf("note %+v has no line or text", n)
			}
		}
	})
}
