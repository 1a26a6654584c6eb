package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
)

// The test process holds its own code: the running test's package and the
// testing package among the resident pages of .text.
func TestMeasuresItself(t *testing.T) {
	r, err := measure(os.Getpid())
	if errors.Is(err, fs.ErrPermission) {
		t.Skipf("pagemap unreadable here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.sections[".text"] == 0 || r.sections[".text"] > r.pages {
		t.Fatalf("%d resident pages, %d of .text", r.pages, r.sections[".text"])
	}
	for _, pkg := range []string{"testing", "github.com/vkubelet/virtual-kubelet/hack/bench/residentpages"} {
		if r.packages[pkg] == 0 {
			t.Errorf("no resident code page of %s; packages %v", pkg, r.packages)
		}
	}
	var out bytes.Buffer
	r.print(&out, 5)
	if !strings.Contains(out.String(), ".text") || !strings.Contains(out.String(), "by module") {
		t.Errorf("report:\n%s", out.String())
	}
}

func TestModule(t *testing.T) {
	for pkg, want := range map[string]string{
		"k8s.io/api/core/v1":                     "k8s.io/api/core",
		"crypto/tls":                             "crypto",
		"github.com/google/cel-go/common/stdlib": "github.com/google/cel-go",
		"runtime":                                "runtime",
	} {
		if got := module(pkg); got != want {
			t.Errorf("module(%q) = %q, want %q", pkg, got, want)
		}
	}
}
