package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// replacedVersion is the version go itself writes for a requirement whose
// module is replaced by a directory: any version would do.
const replacedVersion = "v0.0.0-00010101000000-000000000000"

// modTarget says what a go.mod requirement on the prior module becomes: our
// module at version, and, if dir is set, replaced by the checkout at dir.
type modTarget struct {
	version string
	dir     string // absolute
}

// note is something a user must act on, at a line of a file.
type note struct {
	line int
	text string
}

// rewriteMod returns the go.mod in src with its requirement on the prior
// module replaced by one on ours, what it changed, and what it left for the
// user to do. Replacements of the prior module are dropped: they pointed at
// a fork or a checkout of code that is no longer imported.
func rewriteMod(filename string, src []byte, to modTarget) ([]byte, []change, []note, error) {
	f, err := modfile.Parse(filename, src, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	var (
		changes []change
		notes   []note
		found   bool
	)
	for _, r := range f.Require {
		if r.Mod.Path != priorModule {
			continue
		}
		found = true
		// DropRequire clears r: read it first.
		line, from := r.Syntax.Start.Line, "require "+priorModule+" "+r.Mod.Version
		if err := f.DropRequire(priorModule); err != nil {
			return nil, nil, nil, err
		}
		if to.version == "" {
			notes = append(notes, note{line, fmt.Sprintf("removed %s; add %s with `go get %s@VERSION`, or run port-provider again with -version or -replace",
				from, ourModule, ourModule)})
			continue
		}
		if err := f.AddRequire(ourModule, to.version); err != nil {
			return nil, nil, nil, err
		}
		changes = append(changes, change{line: line, from: from, to: "require " + ourModule + " " + to.version})
	}
	for _, r := range f.Replace {
		if r.Old.Path != priorModule {
			continue
		}
		line, target := r.Syntax.Start.Line, r.New.Path
		if r.New.Version != "" {
			target += " " + r.New.Version
		}
		if err := f.DropReplace(priorModule, r.Old.Version); err != nil {
			return nil, nil, nil, err
		}
		notes = append(notes, note{line, fmt.Sprintf("removed replace %s => %s; if that copy carried changes you rely on, carry them to %s", priorModule, target, ourModule)})
	}
	replaced := found && to.dir != ""
	if replaced {
		dir, err := localPath(filename, to.dir)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := f.AddReplace(ourModule, "", dir, ""); err != nil {
			return nil, nil, nil, err
		}
	}
	if len(changes) == 0 && len(notes) == 0 {
		return src, nil, nil, nil
	}
	f.SortBlocks()
	f.Cleanup()
	out, err := f.Format()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", filename, err)
	}
	// The parser takes some malformed lines (a require of the path ")")
	// that, formatted, no longer parse: such a go.mod is refused, not
	// written.
	g, err := modfile.Parse(filename, out, nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: rewritten, it would not parse (%v): correct its require and replace lines first", filename, err)
	}
	if replaced {
		// The new line's number is known once formatted.
		for _, r := range g.Replace {
			if r.Old.Path == ourModule {
				changes = append(changes, change{line: r.Syntax.Start.Line, from: "(no replace)", to: "replace " + ourModule + " => " + r.New.Path})
			}
		}
	}
	return out, changes, notes, nil
}

// localPath is dir as a replace directive in the go.mod at filename names
// it: relative to that go.mod's directory, starting with ./ or ../ so that
// it is not read as a module path.
func localPath(filename, dir string) (string, error) {
	modDir, err := filepath.Abs(filepath.Dir(filename))
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(modDir, dir)
	if err != nil {
		return filepath.ToSlash(dir), nil // another volume: keep it absolute
	}
	rel = filepath.ToSlash(rel)
	if rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") {
		rel = "./" + rel
	}
	return rel, nil
}
