// Package gomodfile reads go.mod files for tests that compare module
// versions across the repository's modules.
package gomodfile

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"
)

// Parse reads and parses the go.mod file at path (slash-separated), failing
// t when it cannot.
func Parse(t testing.TB, path string) *modfile.File {
	t.Helper()
	data, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Versions are the module versions the go.mod at path builds with: its
// requirements, with its replacements applied.
func Versions(t testing.TB, path string) map[string]string {
	t.Helper()
	f := Parse(t, path)
	v := map[string]string{}
	for _, r := range f.Require {
		v[r.Mod.Path] = r.Mod.Version
	}
	for _, r := range f.Replace {
		v[r.Old.Path] = r.New.Version
	}
	return v
}
