package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/kubernetes"
)

// profileWindow is the length of each CPU profile of a phase, in seconds:
// the last window of a phase runs past its end by at most this.
const profileWindow = 5

// phaseFunc is passHooks.phase: called as a phase starts, its result as it
// ends.
type phaseFunc func(ctx context.Context, phase string) (end func())

// fetchProfile gets one CPU profile of a process over the given seconds.
type fetchProfile func(ctx context.Context, seconds int) ([]byte, error)

// phaseProfiler profiles one process's CPU over each phase of a pass in
// consecutive windows, saved in dir as <prefix>-<phase>-<i>.pb.gz: pprof
// endpoints profile for a time fixed in advance, and a phase's length is
// not known in advance. `go tool pprof -top` merges the windows it is
// given.
func phaseProfiler(dir, prefix string, fetch fetchProfile) phaseFunc {
	return func(ctx context.Context, phase string) func() {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				// Each window completes (ctx, not stop): a cancelled profile
				// request returns nothing.
				raw, err := fetch(ctx, profileWindow)
				if err != nil {
					logf("CPU profile %s (%s): %v", prefix, phase, err)
					return
				}
				path := filepath.Join(dir, fmt.Sprintf("%s-%s-%02d.pb.gz", prefix, phase, i))
				if err := os.WriteFile(path, raw, 0o644); err != nil {
					logf("CPU profile %s: %v", prefix, err)
					return
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
		var once sync.Once
		return func() {
			once.Do(func() { close(stop) })
			<-done
		}
	}
}

// apiServerProfiler returns passHooks.phase for a pass named pass of n pods
// when -apiserver-profile and -out are given, nil otherwise: the API
// server's CPU over each phase, apiserver-cpu-<pass>-<n>-<phase>-<i>.pb.gz.
func apiServerProfiler(c config, client kubernetes.Interface, pass string, n int) phaseFunc {
	if !c.apiServerProfile || c.outDir == "" {
		return nil
	}
	prefix := fmt.Sprintf("apiserver-cpu-%s-%d", strings.ReplaceAll(pass, " ", "-"), n)
	return phaseProfiler(c.outDir, prefix, func(ctx context.Context, seconds int) ([]byte, error) {
		return client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", fmt.Sprint(seconds)).DoRaw(ctx)
	})
}

// allPhases is a phase hook running each of hooks that is not nil; nil
// when none is.
func allPhases(hooks ...phaseFunc) phaseFunc {
	hooks = slices.DeleteFunc(hooks, func(h phaseFunc) bool { return h == nil })
	switch len(hooks) {
	case 0:
		return nil
	case 1:
		return hooks[0]
	}
	return func(ctx context.Context, phase string) func() {
		ends := make([]func(), len(hooks))
		for i, h := range hooks {
			ends[i] = h(ctx, phase)
		}
		return func() {
			for _, end := range ends {
				end()
			}
		}
	}
}
