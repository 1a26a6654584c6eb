//go:build e2e

package deploy_test

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildStaticIsStatic builds the image's binary the way the Makefile
// and Dockerfile do and checks it needs no dynamic loader or shared library,
// so it runs on a distroless/static base.
func TestBuildStaticIsStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary: skipped with -short")
	}
	bin := t.TempDir()
	// Without -trimpath, which changes only the file names the binary
	// records: on a fresh machine the build then reuses the control plane's
	// compiled packages rather than compiling the whole graph a third time
	// (about 12 minutes on two cores).
	cmd := exec.Command("make", "-C", "../../..", "build-static", "BIN="+bin, "STATIC_PATHS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build-static: %v\n%s", err, out)
	}
	path := filepath.Join(bin, "virtual-kubelet-static")
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has a program interpreter: it is dynamically linked")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries: %v", libs)
	}
	out, err := exec.Command(path, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "virtual-kubelet v") {
		t.Errorf("static binary does not run: %v %s", err, out)
	}
}
