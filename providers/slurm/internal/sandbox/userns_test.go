package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestEveryContainerGetsAUserNamespace: bubblewrap's argv for a container
// unshares the user namespace, which is what the provider's
// RuntimeFeatures (UserNamespaces) declares.
func TestEveryContainerGetsAUserNamespace(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"c/app/root": "", "c/app/workdir": "", "c/app/tty": "", "hostname": "pod",
		"c/app/argv": "/bin/true\x00", "c/app/env": "", "c/app/mounts": "", "hostpaths": "", "hidden": "",
	} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	argv, keep, err := Args(dir, "app", "/usr/bin/bwrap", keepFD)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range keep {
		f.Close()
	}
	if !slices.Contains(argv, "--unshare-user") {
		t.Errorf("bubblewrap's argv has no --unshare-user: %q", argv)
	}
}
