package grpcplugin_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/vkubelet/virtual-kubelet/node"
)

// fixedStats serves one Summary whose times have a fraction of a second.
type fixedStats struct {
	node.Provider
	summary statsv1alpha1.Summary
}

func (f fixedStats) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return &f.summary, nil
}

// TestStatsTimesKeepTheirFraction: a Summary crosses the plugin protocol with
// its times to the nanosecond, as metrics-server needs to turn counters into
// rates (metav1.Time's own JSON would cut them to the second). A zero time
// stays zero.
func TestStatsTimesKeepTheirFraction(t *testing.T) {
	dir := socketDir(t)
	sock := filepath.Join(dir, "p.sock")
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	sample := start.Add(12*time.Second + 734*time.Millisecond + 5)
	usage := uint64(1234567)
	plugin := fixedStats{Provider: newMock(t, dir, ""), summary: statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{
			NodeName:  "vk0",
			StartTime: metav1.NewTime(start),
			CPU:       &statsv1alpha1.CPUStats{Time: metav1.NewTime(sample), UsageCoreNanoSeconds: &usage},
		},
		Pods: []statsv1alpha1.PodStats{{
			PodRef: statsv1alpha1.PodReference{Name: "web", Namespace: "ns"},
			CPU:    &statsv1alpha1.CPUStats{Time: metav1.NewTime(sample), UsageCoreNanoSeconds: &usage},
		}},
	}}
	servePlugin(t, sock, plugin)
	p := dial(t, dir, sock)

	got, err := p.(node.StatsProvider).GetStatsSummary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !got.Node.CPU.Time.Time.Equal(sample) || !got.Pods[0].CPU.Time.Time.Equal(sample) {
		t.Errorf("CPU sample times: node %s, pod %s; want %s", got.Node.CPU.Time.Format(time.RFC3339Nano), got.Pods[0].CPU.Time.Format(time.RFC3339Nano), sample.Format(time.RFC3339Nano))
	}
	if !got.Node.StartTime.Time.Equal(start) || !got.Pods[0].StartTime.IsZero() {
		t.Errorf("start times: node %s, pod %s", got.Node.StartTime, got.Pods[0].StartTime)
	}
	if *got.Node.CPU.UsageCoreNanoSeconds != usage || got.Pods[0].PodRef.Name != "web" {
		t.Errorf("summary changed on the way: %+v", got)
	}
}
