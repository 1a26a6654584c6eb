package slurm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadConfigNamesTheBadField(t *testing.T) {
	good := "workDir: /srv/vk\nimages:\n  busybox: {host: true}\n"
	for _, tc := range []struct{ name, data, want string }{
		{"relative workDir", "workDir: vk\nimages: {busybox: {host: true}}", "workDir: must be an absolute path"},
		{"no images", "workDir: /srv/vk", "images: the table is empty"},
		{"two kinds", "workDir: /srv/vk\nimages: {busybox: {host: true, root: /srv/img}}", "images.busybox: set exactly one"},
		{"relative root", "workDir: /srv/vk\nimages: {debian: {root: srv/img}}", "images.debian.root: must be an absolute path"},
		{"bad partition", good + "partition: a b", `partition: "a b" is not a Slurm name`},
		{"option as user", good + "user: --uid=0", `user: "--uid=0" is not a Slurm name`},
		{"bad poll", good + "pollInterval: 1ms", "pollInterval: must be a duration of at least 100ms"},
		{"bad capacity", good + "capacity: {cpu: lots}", `capacity.cpu: invalid quantity "lots"`},
		{"unknown field", good + "partitoin: batch", `unknown field "partitoin"`},
		{"relative slurmBin", good + "slurmBin: bin", "slurmBin: must be an absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadConfig(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %v, want one naming %s and saying %q", err, path, tc.want)
			}
		})
	}
	if _, err := LoadConfig(""); err == nil || !strings.Contains(err.Error(), "--provider-config is required") {
		t.Errorf("no config: %v", err)
	}
}

func TestLoadConfigDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	data := "workDir: /srv/vk/\nimages:\n  busybox: {host: true}\n  py: {prefix: [python3]}\ncapacity: {cpu: \"4\"}\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.WorkDir != "/srv/vk" || cfg.SlurmBin != "/usr/bin" || cfg.Bwrap != "/usr/bin/bwrap" || cfg.poll != 2*time.Second {
		t.Errorf("defaults: %+v", cfg)
	}
	if c := cfg.capacity(); c.Cpu().String() != "4" {
		t.Errorf("capacity %v", c)
	}
}
