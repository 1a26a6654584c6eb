package grpcplugin_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/vkubelet/virtual-kubelet/node"
)

// BenchmarkPodCalls measures one pod's CreatePod, GetPodStatus and
// DeletePod against the mock in process and behind the plugin boundary (a
// plugin served in this process on a unix socket: the gRPC and encoding
// cost, not a second process's scheduling). BENCHMARKS.md has the ratio.
func BenchmarkPodCalls(b *testing.B) {
	run := func(b *testing.B, p node.Provider) {
		ctx := context.Background()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			pod := testPod(fmt.Sprintf("p%d", i))
			if err := p.CreatePod(ctx, pod); err != nil {
				b.Fatal(err)
			}
			if _, err := p.GetPodStatus(ctx, pod.Namespace, pod.Name); err != nil {
				b.Fatal(err)
			}
			if err := p.DeletePod(ctx, pod); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("in-process", func(b *testing.B) {
		run(b, newMock(b, b.TempDir(), ""))
	})
	b.Run("grpc", func(b *testing.B) {
		dir := socketDir(b)
		sock := filepath.Join(dir, "p.sock")
		servePlugin(b, sock, newMock(b, dir, ""))
		run(b, dial(b, dir, sock))
	})
}
