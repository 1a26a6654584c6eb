// Command podtimes watches every pod of a cluster until interrupted and
// then prints, for each namespace of at least 100 pods, where the deletes
// waited: deleting→terminal (the deletion timestamp seen, then a terminal
// phase) and terminal→gone (then the object removed), as percentiles, and
// a 5-second timeline of the three events. It is run beside `make bench`
// (BENCHMARKS.md):
//
//	go run ./hack/bench/podtimes -kubeconfig /tmp/virtual-kubelet/local/admin.kubeconfig > times.txt
//
// The times are when this watcher saw each event, so they include its
// watch's delay, the same for every pass.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"os"
	"os/signal"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("podtimes: %v", err)
	}
	cfg.QPS = -1 // one watch; no client-side limit
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatalf("podtimes: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	seen := watchPods(ctx, client)
	report(os.Stdout, seen)
}

// podTimes is when each event of one pod was first seen.
type podTimes struct{ deleting, terminal, gone time.Time }

// watchPods records every pod's events until ctx ends, watching again when
// the API server ends a watch.
func watchPods(ctx context.Context, client kubernetes.Interface) map[string]map[string]*podTimes {
	seen := map[string]map[string]*podTimes{}
	for ctx.Err() == nil {
		w, err := client.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			if ctx.Err() == nil {
				log.Printf("podtimes: watching pods: %v", err)
				time.Sleep(time.Second)
			}
			continue
		}
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				record(seen, ev.Type, p, time.Now())
			}
		}
	}
	return seen
}

func record(seen map[string]map[string]*podTimes, typ watch.EventType, p *corev1.Pod, now time.Time) {
	ns := seen[p.Namespace]
	if ns == nil {
		ns = map[string]*podTimes{}
		seen[p.Namespace] = ns
	}
	t := ns[p.Name]
	if t == nil {
		t = &podTimes{}
		ns[p.Name] = t
	}
	first := func(at *time.Time, happened bool) {
		if happened && at.IsZero() {
			*at = now
		}
	}
	first(&t.deleting, p.DeletionTimestamp != nil)
	first(&t.terminal, p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
	first(&t.gone, typ == watch.Deleted)
}

func report(w io.Writer, seen map[string]map[string]*podTimes) {
	for _, name := range slices.Sorted(maps.Keys(seen)) {
		pods := seen[name]
		if len(pods) < 100 {
			continue
		}
		var toTerminal, toGone, total []float64
		var start time.Time
		for _, t := range pods {
			if !t.deleting.IsZero() && (start.IsZero() || t.deleting.Before(start)) {
				start = t.deleting
			}
		}
		timeline := map[int]*[3]int{}
		count := func(at time.Time, i int) {
			if at.IsZero() {
				return
			}
			b := int(at.Sub(start) / (5 * time.Second))
			if timeline[b] == nil {
				timeline[b] = &[3]int{}
			}
			timeline[b][i]++
		}
		for _, t := range pods {
			if t.deleting.IsZero() || t.gone.IsZero() {
				continue
			}
			if !t.terminal.IsZero() {
				toTerminal = append(toTerminal, t.terminal.Sub(t.deleting).Seconds())
				toGone = append(toGone, t.gone.Sub(t.terminal).Seconds())
			}
			total = append(total, t.gone.Sub(t.deleting).Seconds())
			count(t.deleting, 0)
			count(t.terminal, 1)
			count(t.gone, 2)
		}
		fmt.Fprintf(w, "== %s: %d pods\n", name, len(pods))
		for _, d := range []struct {
			name   string
			values []float64
		}{{"deleting→terminal", toTerminal}, {"terminal→gone", toGone}, {"deleting→gone", total}} {
			if len(d.values) == 0 {
				continue
			}
			slices.Sort(d.values)
			at := func(q int) float64 { return d.values[len(d.values)*q/100] }
			fmt.Fprintf(w, "  %-18s p10 %.2f p50 %.2f p90 %.2f p99 %.2f\n", d.name, at(10), at(50), at(90), at(99))
		}
		for _, b := range slices.Sorted(maps.Keys(timeline)) {
			c := timeline[b]
			fmt.Fprintf(w, "  t=%3ds deleting %5d terminal %5d gone %5d\n", b*5, c[0], c[1], c[2])
		}
	}
}
