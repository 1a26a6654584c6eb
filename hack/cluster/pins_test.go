package main

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestPinsMatchControlPlane: every module hack/metrics-server/build pins is
// pinned to the version the control plane's wrapper module builds with.
// Otherwise a fresh machine compiles those packages twice, once for each
// binary (minutes), and nothing else would say so.
func TestPinsMatchControlPlane(t *testing.T) {
	controlPlane := versions(t, "../controlplane/build/go.mod")
	pins := parseMod(t, "../metrics-server/build/go.mod").Replace
	if len(pins) == 0 {
		t.Fatal("hack/metrics-server/build/go.mod pins nothing")
	}
	for _, r := range pins {
		want, ok := controlPlane[r.Old.Path]
		switch {
		case !ok:
			t.Errorf("metrics-server pins %s, which the control plane does not use: drop the pin", r.Old.Path)
		case r.New.Path != r.Old.Path || r.New.Version != want:
			t.Errorf("metrics-server pins %s to %s %s; the control plane builds with %s", r.Old.Path, r.New.Path, r.New.Version, want)
		}
	}
}

// versions are the module versions a go.mod builds with: its requirements,
// with its replacements applied.
func versions(t *testing.T, path string) map[string]string {
	f := parseMod(t, path)
	v := map[string]string{}
	for _, r := range f.Require {
		v[r.Mod.Path] = r.Mod.Version
	}
	for _, r := range f.Replace {
		v[r.Old.Path] = r.New.Version
	}
	return v
}

func parseMod(t *testing.T, path string) *modfile.File {
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
