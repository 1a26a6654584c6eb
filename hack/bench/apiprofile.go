package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/client-go/kubernetes"
)

// apiProfileWindow is the length of each API server CPU profile, in
// seconds: the last window of a phase runs past its end by at most this.
const apiProfileWindow = 5

// apiServerProfiler returns passHooks.phase for a pass named pass of n pods
// when -apiserver-profile and -out are given, nil otherwise. Each phase gets
// the API server's CPU profiled in consecutive windows, saved as
// apiserver-cpu-<pass>-<n>-<phase>-<i>.pb.gz: the API server's pprof
// endpoint profiles for a time fixed in advance, and a phase's length is
// not known in advance. `go tool pprof -top` merges the windows it is
// given.
func apiServerProfiler(c config, client kubernetes.Interface, pass string, n int) func(ctx context.Context, phase string) (end func()) {
	if !c.apiServerProfile || c.outDir == "" {
		return nil
	}
	prefix := fmt.Sprintf("apiserver-cpu-%s-%d", strings.ReplaceAll(pass, " ", "-"), n)
	return func(ctx context.Context, phase string) func() {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				// Each window completes (ctx, not stop): a cancelled profile
				// request returns nothing.
				raw, err := client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
					Param("seconds", fmt.Sprint(apiProfileWindow)).DoRaw(ctx)
				if err != nil {
					logf("API server CPU profile (%s %s): %v", pass, phase, err)
					return
				}
				path := filepath.Join(c.outDir, fmt.Sprintf("%s-%s-%02d.pb.gz", prefix, phase, i))
				if err := os.WriteFile(path, raw, 0o644); err != nil {
					logf("API server CPU profile: %v", err)
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
