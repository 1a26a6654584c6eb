package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// -compare-binaries takes name=path pairs of existing files; anything else
// is refused naming the pair.
func TestParseBinaries(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := parseBinaries("x=" + a + ", y=" + b + ",")
	if err != nil || len(got) != 2 || got[0] != (namedBinary{"x", a}) || got[1] != (namedBinary{"y", b}) {
		t.Fatalf("parseBinaries = %v, %v", got, err)
	}
	if got, err := parseBinaries(""); err != nil || len(got) != 0 {
		t.Errorf("empty: %v, %v", got, err)
	}
	for in, want := range map[string]string{
		a:                      "is not name=path",
		"=" + a:                "is not name=path",
		"x=":                   "is not name=path",
		"x=" + a + ",x=" + b:   "named twice",
		"x=" + dir:             "is not a binary",
		"x=" + dir + "/absent": "is not a binary",
	} {
		if _, err := parseBinaries(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseBinaries(%q) = %v, want an error saying %q", in, err, want)
		}
	}
}

// Each compared binary gets a row per run, as ratios to that run's floor,
// and its medians over the runs beside -binary's; without
// -compare-binaries, no table.
func TestComparedTable(t *testing.T) {
	floor := pass(10*time.Second, 10*time.Second)
	var results []*result
	for i, gone := range []time.Duration{10 * time.Second, 12 * time.Second} {
		results = append(results, &result{N: 1000, Run: i + 1, Floor: floor, Daemon: pass(8*time.Second, gone),
			Usage:    processUsage{PeakRSS: 100 << 20},
			Compared: []comparedPass{{Name: "lib", Daemon: pass(9*time.Second, gone+2*time.Second), Usage: processUsage{PeakRSS: 120 << 20}}}})
	}
	var b strings.Builder
	comparedTable(&b, results)
	for _, want := range []string{
		"| 1000, run 2 (floor first) | lib | 9.00s (0.90x) | 14.00s (1.40x) |",
		"| -binary | 2 | **0.80x** | **1.10x** | **100 MiB** |",
		"| lib | 2 | **0.90x** | **1.30x** | **120 MiB** |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("compared table lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	results[0].Compared, results[1].Compared = nil, nil
	comparedTable(&b, results)
	if b.Len() != 0 {
		t.Errorf("without -compare-binaries: %q", b.String())
	}
}
