package main

import (
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/testing/gomodfile"
)

// TestPinsMatchControlPlane: every module hack/metrics-server/build pins is
// pinned to the version the control plane's wrapper module builds with.
// Otherwise a fresh machine compiles those packages twice, once for each
// binary (minutes), and nothing else would say so.
func TestPinsMatchControlPlane(t *testing.T) {
	controlPlane := gomodfile.Versions(t, "../controlplane/build/go.mod")
	pins := gomodfile.Parse(t, "../metrics-server/build/go.mod").Replace
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

// newerThanControlPlane are the modules the daemon deliberately requires
// at a version other than the control plane's, and why: each costs a fresh
// machine the packages that import it, compiled once more.
var newerThanControlPlane = map[string]string{
	// The slurm provider resolves tenants' paths with it: the newest release.
	"github.com/cyphar/filepath-securejoin": "v0.7.0",
	"cyphar.com/go-pathrs":                  "v0.2.5", // securejoin v0.7.0's
}

// TestDaemonSharesControlPlaneVersions: the daemon's module requires the
// modules it shares with the control plane at the control plane's versions.
// make test's static build (CGO_ENABLED=0, as the control plane's) then
// reuses the packages the control plane's build compiled; with other
// versions, a fresh machine compiles the whole graph once more (about 12
// minutes on two cores).
func TestDaemonSharesControlPlaneVersions(t *testing.T) {
	controlPlane := gomodfile.Versions(t, "../controlplane/build/go.mod")
	for _, r := range gomodfile.Parse(t, "../../go.mod").Require {
		want, ok := controlPlane[r.Mod.Path]
		if exception, listed := newerThanControlPlane[r.Mod.Path]; listed {
			if r.Mod.Version != exception {
				t.Errorf("go.mod requires %s %s; newerThanControlPlane lists %s", r.Mod.Path, r.Mod.Version, exception)
			}
			continue
		}
		if ok && r.Mod.Version != want {
			t.Errorf("go.mod requires %s %s; the control plane builds with %s", r.Mod.Path, r.Mod.Version, want)
		}
	}
}
