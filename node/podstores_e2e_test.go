//go:build e2e

package node_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/nodeutil"
	"github.com/vkubelet/virtual-kubelet/node/volume"
	"github.com/vkubelet/virtual-kubelet/test/poll"
)

// storeProvider is a notifying testProvider that fills every store of
// per-pod state the controller has: it takes its pods' volumes, and has the
// controller run their probes, exec ones, which always pass. Its pods get
// their IPs from the node's pod CIDR.
type storeProvider struct {
	notifyingProvider
	volumeSets, execs atomic.Int64
}

func (p *storeProvider) SetPodVolumes(context.Context, *corev1.Pod, *volume.Contents) error {
	p.volumeSets.Add(1)
	return nil
}

func (p *storeProvider) PodNetworkReachable() bool { return false }

func (p *storeProvider) RunInContainer(context.Context, string, string, string, []string, api.AttachIO) error {
	p.execs.Add(1)
	return nil
}

var (
	_ node.PodVolumeHandler = (*storeProvider)(nil)
	_ node.ProbeDelegator   = (*storeProvider)(nil)
	_ node.ExecProvider     = (*storeProvider)(nil)
)

// storedPod is a pod with a configMap and a downwardAPI volume and an exec
// readiness probe.
func storedPod(ns, nodeName, name string) *corev1.Pod {
	pod := newPod(ns, nodeName, name)
	pod.Labels = map[string]string{"app": "stores"}
	pod.Spec.AutomountServiceAccountToken = ptr.To(false)
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}},
		{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: []corev1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
	}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "config", MountPath: "/config"}, {Name: "info", MountPath: "/info"}}
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
		PeriodSeconds: 10,
	}
	return pod
}

// TestPerPodStoresEmptyAfterPodsGo creates 1,000 pods on one node through
// the API server, with IPs, volumes and probes, waits until every one is
// Running and ready, and deletes them all: then every store of per-pod
// state (the records, the start listing, the queues, the IPs, the volumes,
// the probes) holds nothing, each cleared by its owner.
func TestPerPodStoresEmptyAfterPodsGo(t *testing.T) {
	const pods = 1000
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := &storeProvider{notifyingProvider: notifyingProvider{newTestProvider()}}
	n, nodeName := startNode(t, c, p, func(cfg *nodeutil.Config) {
		base := cfg.ConfigurePodController
		cfg.ConfigurePodController = func(pc *node.PodControllerConfig) {
			base(pc)
			pc.PodCIDRs = func(context.Context) ([]string, error) { return []string{"10.200.0.0/21"}, nil }
		}
	})
	pc := n.PodController()

	var wg sync.WaitGroup
	errs := make(chan error, pods)
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, storedPod(ns, nodeName, fmt.Sprintf("p%04d", i)), metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range pods {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	poll.Until(t, 10*time.Minute, "every pod Running and ready", func() (bool, string) {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, pod := range list.Items {
			if pod.Status.Phase == corev1.PodRunning && len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].Ready {
				ready++
			}
		}
		return ready == pods, fmt.Sprintf("%d of %d", ready, pods)
	})
	// Each store holds every pod; the listing was taken before any pod
	// came and holds none.
	lens := node.PerPodStoreLens(pc)
	for store, want := range map[string]int{"*node.podRecords": pods, "*podips.Manager": pods, "*podvolumes.Manager": pods, "*prober.Manager": pods} {
		if lens[store] != want {
			t.Errorf("while the pods run, %s holds %d pods, want %d (all: %v)", store, lens[store], want, lens)
		}
	}
	if p.volumeSets.Load() < pods || p.execs.Load() == 0 {
		t.Errorf("SetPodVolumes called %d times, %d exec probes run; want every pod's volumes set and its probe run", p.volumeSets.Load(), p.execs.Load())
	}

	if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Minute, "every pod gone", func() (bool, string) {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 0, fmt.Sprintf("%d left", len(list.Items))
	})
	poll.Until(t, time.Minute, "every per-pod store empty", func() (bool, string) {
		lens := node.PerPodStoreLens(pc)
		var held []string
		for store, n := range lens {
			if n != 0 {
				held = append(held, fmt.Sprintf("%s: %d", store, n))
			}
		}
		sort.Strings(held)
		return len(held) == 0, strings.Join(held, ", ")
	})
	if got := len(node.PerPodStoreLens(pc)); got < 6 {
		t.Errorf("%d stores checked, want the records, listing, queues, IPs, volumes and probes", got)
	}
}
