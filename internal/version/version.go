// Package version is the build's version, set with -ldflags -X at build time.
package version

import "runtime/debug"

// Version and GitCommit are stamped by the Makefile and the Dockerfile.
var (
	Version   = "v0.1.0-dev"
	GitCommit = ""
)

// Commit returns the git commit the binary was built from, from the
// stamp or, failing that, from the Go build info.
func Commit() string {
	if GitCommit != "" {
		return GitCommit
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// KubeletVersion is what the Node reports as its kubelet version: the
// Kubernetes version whose kubelet API we serve, marked as ours.
func KubeletVersion() string {
	return "v1.36.3-vk." + trimV(Version)
}

func trimV(v string) string {
	if len(v) > 0 && v[0] == 'v' {
		return v[1:]
	}
	return v
}
