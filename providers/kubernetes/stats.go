package kubernetes

import (
	"context"
	"fmt"
	"time"

	dto "github.com/prometheus/client_model/go"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/vkubelet/virtual-kubelet/node/api"
	"k8s.io/utils/ptr"
)

// GetStatsSummary builds the summary from B's metrics.k8s.io (metrics-server
// or equivalent): per-container CPU and memory of this node's pods and their
// sums. Where B does not serve that API the error says so.
func (p *Provider) GetStatsSummary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	mc, err := metricsclient.NewForConfig(p.remoteConfig)
	if err != nil {
		return nil, err
	}
	list, err := mc.MetricsV1beta1().PodMetricses(p.cfg.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{LabelNode: p.nodeName}).String(),
	})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("stats are not available: the remote cluster does not serve metrics.k8s.io (install metrics-server there)")
	}
	if err != nil {
		return nil, fmt.Errorf("stats from the remote cluster's metrics.k8s.io: %w", err)
	}
	ts := metav1.NewTime(time.Now())
	var nodeCPU, nodeMem uint64
	pods := make([]statsv1alpha1.PodStats, 0, len(list.Items))
	for _, m := range list.Items {
		ns, name := m.Labels[LabelSourceNamespace], ""
		var uid string
		if obj, ok, _ := p.pods.GetIndexer().GetByKey(m.Namespace + "/" + m.Name); ok {
			remote := obj.(*corev1.Pod)
			ns, name, _, _ = sourceOf(remote)
			uid = remote.Labels[LabelSourceUID]
		}
		if name == "" {
			continue // the pod is gone from B
		}
		pod := statsv1alpha1.PodStats{PodRef: statsv1alpha1.PodReference{Namespace: ns, Name: name, UID: uid}, StartTime: m.Timestamp}
		var podCPU, podMem uint64
		for _, c := range m.Containers {
			cpu := uint64(c.Usage.Cpu().ScaledValue(-9)) // nanocores
			mem := uint64(c.Usage.Memory().Value())
			pod.Containers = append(pod.Containers, statsv1alpha1.ContainerStats{
				Name:   c.Name,
				CPU:    &statsv1alpha1.CPUStats{Time: m.Timestamp, UsageNanoCores: ptr.To(cpu)},
				Memory: &statsv1alpha1.MemoryStats{Time: m.Timestamp, WorkingSetBytes: ptr.To(mem)},
			})
			podCPU, podMem = podCPU+cpu, podMem+mem
		}
		pod.CPU = &statsv1alpha1.CPUStats{Time: m.Timestamp, UsageNanoCores: ptr.To(podCPU)}
		pod.Memory = &statsv1alpha1.MemoryStats{Time: m.Timestamp, WorkingSetBytes: ptr.To(podMem)}
		pods = append(pods, pod)
		nodeCPU, nodeMem = nodeCPU+podCPU, nodeMem+podMem
	}
	return &statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{
			NodeName:  p.nodeName,
			StartTime: metav1.NewTime(p.startedAt),
			CPU:       &statsv1alpha1.CPUStats{Time: ts, UsageNanoCores: ptr.To(nodeCPU)},
			Memory:    &statsv1alpha1.MemoryStats{Time: ts, WorkingSetBytes: ptr.To(nodeMem)},
		},
		Pods: pods,
	}, nil
}

// GetMetricsResource serves /metrics/resource from the stats summary, in the
// kubelet's format.
func (p *Provider) GetMetricsResource(ctx context.Context) ([]*dto.MetricFamily, error) {
	return api.MetricsResourceFromSummary(p.GetStatsSummary)(ctx)
}
