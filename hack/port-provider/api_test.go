package main

import (
	"bufio"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	sectionRE = regexp.MustCompile(`^### package \w+ \(\./([\w/]*)\)(?::.*)?$`)
	methodRE  = regexp.MustCompile(`^func \((?:\w+\s+)?\*?(\w+)\) (\w+)\(`)
	declRE    = regexp.MustCompile(`^(?:func|type|var|const) (\w+)`)
)

// upstreamAPI reads the reference list: each prior package's lines, by
// package path relative to the prior module (a package with none is there
// too), and the declarations the header gives ("#   type ..." lines, of
// internal types node aliases).
func upstreamAPI(t *testing.T) (sections map[string][]string, headerTypes []string) {
	t.Helper()
	f, err := os.Open("testdata/upstream-api.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sections = map[string][]string{}
	pkg := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m := sectionRE.FindStringSubmatch(line); m != nil {
			pkg = m[1]
			sections[pkg] = nil
			continue
		}
		if pkg != "" {
			sections[pkg] = append(sections[pkg], line)
		} else if decl, ok := strings.CutPrefix(line, "#   type "); ok {
			headerTypes = append(headerTypes, "type "+decl)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sections, headerTypes
}

// upstreamNames lists, for each prior package, its exported names, methods
// as Type.Method.
func upstreamNames(t *testing.T) map[string][]string {
	t.Helper()
	sections, _ := upstreamAPI(t)
	names := map[string][]string{}
	for pkg, lines := range sections {
		names[pkg] = nil
		for _, line := range lines {
			if m := methodRE.FindStringSubmatch(line); m != nil {
				names[pkg] = append(names[pkg], m[1]+"."+m[2])
			} else if m := declRE.FindStringSubmatch(line); m != nil {
				names[pkg] = append(names[pkg], m[1])
			}
		}
	}
	return names
}

// ourNames returns the exported names of the package in dir, as go doc
// shows them, methods as Type.Method.
func ourNames(t *testing.T, dir string) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	d, err := doc.NewFromFiles(fset, files, dir)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			for _, n := range v.Names {
				names[n] = true
			}
		}
	}
	funcs := func(fs []*doc.Func) {
		for _, f := range fs {
			names[f.Name] = true
		}
	}
	values(d.Consts)
	values(d.Vars)
	funcs(d.Funcs)
	for _, typ := range d.Types {
		names[typ.Name] = true
		values(typ.Consts)
		values(typ.Vars)
		funcs(typ.Funcs)
		for _, m := range typ.Methods {
			names[typ.Name+"."+m.Name] = true
		}
	}
	return names
}

// TestUpstreamNamesExist: every exported name of the prior project's
// packages exists in the package the path table maps it to.
func TestUpstreamNamesExist(t *testing.T) {
	root := repoRoot(t)
	upstream := upstreamNames(t)
	if len(upstream) != 12 {
		t.Fatalf("reference list has %d packages, want 12: %v", len(upstream), upstream)
	}
	for rel, want := range upstream {
		prior := priorModule
		if rel != "" {
			prior += "/" + rel
		}
		ours, ok := paths[prior]
		if !ok {
			t.Errorf("%s: no entry in the path table", prior)
			continue
		}
		have := ourNames(t, filepath.Join(root, strings.TrimPrefix(ours, ourModule+"/")))
		if len(want) == 0 {
			t.Errorf("%s: no names read from the reference list", prior)
		}
		for _, n := range want {
			if !have[n] {
				t.Errorf("%s: %s is missing from %s", prior, n, ours)
			}
		}
	}
}

// repoRoot is the module root, two levels up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}
