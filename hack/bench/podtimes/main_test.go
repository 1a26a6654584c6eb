package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestReportSplitsTheDeletes: 100 pods, each terminal 2 s after its
// deletion and gone 1 s later, deleted one every 100 ms.
func TestReportSplitsTheDeletes(t *testing.T) {
	seen := map[string]map[string]*podTimes{}
	start := time.Unix(1_800_000_000, 0)
	for i := range 100 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprint("p", i)}}
		deleted := start.Add(time.Duration(i) * 100 * time.Millisecond)
		record(seen, watch.Added, p, start.Add(-time.Minute))
		p.DeletionTimestamp = &metav1.Time{Time: deleted}
		record(seen, watch.Modified, p, deleted)
		p.Status.Phase = corev1.PodSucceeded
		record(seen, watch.Modified, p, deleted.Add(2*time.Second))
		record(seen, watch.Modified, p, deleted.Add(2500*time.Millisecond)) // not the first: ignored
		record(seen, watch.Deleted, p, deleted.Add(3*time.Second))
	}
	record(seen, watch.Added, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "small", Name: "p"}}, start)
	var b strings.Builder
	report(&b, seen)
	for _, want := range []string{
		"== bench: 100 pods\n",
		"deleting→terminal  p10 2.00 p50 2.00 p90 2.00 p99 2.00\n",
		"terminal→gone      p10 1.00 p50 1.00 p90 1.00 p99 1.00\n",
		"deleting→gone      p10 3.00 p50 3.00 p90 3.00 p99 3.00\n",
		"t=  0s deleting    50 terminal    30 gone    20\n",
		"t=  5s deleting    50 terminal    50 gone    50\n",
		"t= 10s deleting     0 terminal    20 gone    30\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "small") {
		t.Errorf("a namespace of fewer than 100 pods is reported:\n%s", b.String())
	}
}
