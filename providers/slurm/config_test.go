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
		{"old user field", good + "user: vkjobs", `unknown field "user"`},
		{"root tenant", good + "tenants: [{namespaces: [a], user: root}]", `tenants[0].user: "root" is root (uid 0)`},
		{"root uid tenant", good + "tenants: [{namespaces: [a], user: \"0\"}]", `tenants[0].user: "0" is root (uid 0)`},
		{"root group", good + "tenants: [{namespaces: [a], user: nobody, group: root}]", `tenants[0].group: the group of "nobody" is root`},
		{"unknown user", good + "tenants: [{namespaces: [a], user: no-such-user-vk}]", `tenants[0].user: no Unix user "no-such-user-vk"`},
		{"no namespaces", good + "tenants: [{user: nobody}]", `tenants[0].namespaces: name at least one namespace`},
		{"twice", good + "tenants: [{namespaces: [a], user: nobody}, {namespaces: [a], user: nobody}]", `tenants[1].namespaces: namespace "a" is mapped to two tenants`},
		{"bad annotation", good + "tenants: [{namespaces: [a], user: nobody, annotations: [uid]}]", `tenants[0].annotations[0]: "uid" is not one of`},
		{"option as account", good + "tenants: [{namespaces: [a], user: nobody, account: --uid=0}]", `tenants[0].account: "--uid=0" is not a Slurm name`},
		{"host root", good + "hostPaths: [/]", "hostPaths[0]: must be an absolute path other than /"},
		{"log size", good + "containerLogMaxSize: 10", "containerLogMaxSize: must be a quantity of at least 1Ki"},
		{"log files", good + "containerLogMaxFiles: 1", "containerLogMaxFiles: must be at least 2"},
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

// TestCheckPrivileges: a root daemon needs tenants; a daemon of another
// user can only submit as itself.
func TestCheckPrivileges(t *testing.T) {
	if err := (&Config{}).checkPrivileges(0); err == nil || !strings.Contains(err.Error(), "the daemon runs as root") {
		t.Errorf("root without tenants: %v", err)
	}
	withNobody := &Config{Tenants: []Tenant{{Namespaces: []string{"a"}, User: "nobody"}}}
	if err := withNobody.checkPrivileges(0); err != nil {
		t.Errorf("root with a tenant: %v", err)
	}
	if err := withNobody.checkPrivileges(12345); err == nil || !strings.Contains(err.Error(), `submitting jobs as "nobody" needs the daemon to run as root`) {
		t.Errorf("another user with a tenant: %v", err)
	}
	if err := (&Config{}).checkPrivileges(12345); err != nil {
		t.Errorf("a user without tenants: %v", err)
	}
}

func TestFindLauncher(t *testing.T) {
	if got, err := findLauncher("/opt/vk/launcher"); err != nil || got != "/opt/vk/launcher" {
		t.Errorf("a configured launcher: got %q, %v", got, err)
	}
	// Neither beside the test binary nor on an empty PATH.
	t.Setenv("PATH", "")
	if _, err := findLauncher(""); err == nil || !strings.Contains(err.Error(), LauncherName) {
		t.Errorf("no launcher anywhere: got %v, want an error naming %s", err, LauncherName)
	}
}
