package slurm

import (
	"strings"
	"testing"
	"time"
)

func TestParseSstatSumsStepsPerJob(t *testing.T) {
	out := "12.extern|cpu=00:00:00,energy=0,fs/disk=0,mem=0,pages=0,vmem=0\n" +
		"12.batch|cpu=00:01:02.500,energy=0,fs/disk=2012,mem=1808K,pages=0,vmem=9000K\n" +
		"12.0|cpu=01:00:00,mem=1.5M\n" +
		"13.batch|cpu=1-00:00:01,mem=4096\n"
	got, err := parseSstat(out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]jobUsage{
		"12": {cpu: time.Hour + time.Minute + 2500*time.Millisecond, memory: 1808<<10 + 3<<19},
		"13": {cpu: 24*time.Hour + time.Second, memory: 4096},
	}
	if len(got) != len(want) || got["12"] != want["12"] || got["13"] != want["13"] {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestParseSstatRefusesGarbageNamingIt(t *testing.T) {
	for out, want := range map[string]string{
		"12.batch cpu=00:01":         "not JobID|TRESUsageInTot",
		"12.batch|cpu=soon,mem=1K":   `step 12.batch: cpu: "soon"`,
		"12.batch|cpu=00:61,mem=1K":  `"00:61"`,
		"12.batch|cpu=00:01,mem=-1K": `mem: "-1" is not a size`,
		"12.batch|cpu=x-00:01:00":    `"x-00:01:00"`,
		"12.batch|cpu=1:2:3:4":       `"1:2:3:4"`,
	} {
		if _, err := parseSstat(out); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one naming %s", out, err, want)
		}
	}
}
