package mock

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkubelet/virtual-kubelet/node"
)

// TestRuntimeFeaturesConfig: the mock has user namespaces and recursive
// read-only mounts unless its config turns one off; a bad entry is an
// error naming the field.
func TestRuntimeFeaturesConfig(t *testing.T) {
	for _, tc := range []struct {
		entry string
		want  node.RuntimeFeatures
		err   string
	}{
		{`{"capacity": {"cpu": "8"}}`, defaultRuntimeFeatures, ""},
		{`{"runtimeFeatures": {"userNamespaces": false}}`, node.RuntimeFeatures{RecursiveReadOnlyMounts: true}, ""},
		{`{"runtimeFeatures": {"recursiveReadOnlyMounts": false}}`, node.RuntimeFeatures{UserNamespaces: true}, ""},
		{`{"runtimeFeatures": {"userNamespaces": "no"}}`, node.RuntimeFeatures{}, `runtimeFeatures: userNamespaces: must be true or false, got "no"`},
		{`{"runtimeFeatures": {"selinux": true}}`, node.RuntimeFeatures{}, `runtimeFeatures: unknown feature "selinux"`},
		{`{"runtimeFeatures": []}`, node.RuntimeFeatures{}, `runtimeFeatures: must be an object of booleans`},
	} {
		path := filepath.Join(t.TempDir(), "mock.json")
		if err := os.WriteFile(path, []byte(`{"vk0": `+tc.entry+`}`), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig(path, "vk0")
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one saying %q", tc.entry, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.entry, err)
		case cfg.runtime != tc.want:
			t.Errorf("%s: runtime features %+v, want %+v", tc.entry, cfg.runtime, tc.want)
		}
	}
}
