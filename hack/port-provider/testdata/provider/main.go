// Command provider is a small in-memory provider written against the prior
// virtual-kubelet project's API, import paths included: the port-provider
// test rewrites its imports and runs it against a real control plane. Pods
// run at once; their logs are their environment, exec runs echo, attach
// greets, port-forward echoes.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	"github.com/virtual-kubelet/virtual-kubelet/trace"
)

// memProvider keeps pods in memory and reports them running.
type memProvider struct {
	mu     sync.Mutex
	pods   map[string]*corev1.Pod
	notify func(*corev1.Pod)
	ip     string
}

var (
	_ nodeutil.Provider = (*memProvider)(nil)
	_ node.PodNotifier  = (*memProvider)(nil)
)

func key(namespace, name string) string { return namespace + "/" + name }

func (p *memProvider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	ctx, span := trace.StartSpan(ctx, "memProvider.CreatePod")
	defer span.End()
	ctx = span.WithField(ctx, "pod", key(pod.Namespace, pod.Name))

	now := metav1.Now()
	pod = pod.DeepCopy()
	pod.Status = corev1.PodStatus{
		Phase:     corev1.PodRunning,
		HostIP:    p.ip,
		PodIP:     p.ip,
		StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		},
	}
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name:    c.Name,
			Image:   c.Image,
			Ready:   true,
			Started: ptr.To(true),
			State:   corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	p.mu.Lock()
	p.pods[key(pod.Namespace, pod.Name)] = pod
	notify := p.notify
	p.mu.Unlock()
	log.G(ctx).Info("pod created")
	if notify != nil {
		notify(pod.DeepCopy())
	}
	return nil
}

func (p *memProvider) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	_, span := trace.StartSpan(ctx, "memProvider.UpdatePod")
	defer span.End()
	p.mu.Lock()
	defer p.mu.Unlock()
	old, ok := p.pods[key(pod.Namespace, pod.Name)]
	if !ok {
		err := errdefs.NotFoundf("pod %s/%s is not known", pod.Namespace, pod.Name)
		span.SetStatus(err)
		return err
	}
	updated := pod.DeepCopy()
	updated.Status = old.Status
	p.pods[key(pod.Namespace, pod.Name)] = updated
	return nil
}

func (p *memProvider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	ctx, span := trace.StartSpan(ctx, "memProvider.DeletePod")
	defer span.End()
	p.mu.Lock()
	old, ok := p.pods[key(pod.Namespace, pod.Name)]
	delete(p.pods, key(pod.Namespace, pod.Name))
	notify := p.notify
	p.mu.Unlock()
	if !ok {
		err := errdefs.NotFoundf("pod %s/%s is not known", pod.Namespace, pod.Name)
		span.SetStatus(err)
		return err
	}
	log.G(ctx).WithField("pod", pod.Name).Info("pod deleted")
	done := old.DeepCopy()
	now := metav1.Now()
	done.Status.Phase = corev1.PodSucceeded
	for i := range done.Status.ContainerStatuses {
		done.Status.ContainerStatuses[i].Ready = false
		done.Status.ContainerStatuses[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: "Completed", FinishedAt: now,
		}}
	}
	if notify != nil {
		notify(done)
	}
	return nil
}

func (p *memProvider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pod, ok := p.pods[key(namespace, name)]
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s is not known", namespace, name)
	}
	return pod.DeepCopy(), nil
}

func (p *memProvider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

func (p *memProvider) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(p.pods))
	for _, pod := range p.pods {
		out = append(out, pod.DeepCopy())
	}
	return out, nil
}

func (p *memProvider) NotifyPods(_ context.Context, f func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = f
	p.mu.Unlock()
}

func (p *memProvider) container(namespace, pod, name string) (*corev1.Container, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	po, ok := p.pods[key(namespace, pod)]
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s is not known", namespace, pod)
	}
	for i := range po.Spec.Containers {
		if po.Spec.Containers[i].Name == name {
			return po.Spec.Containers[i].DeepCopy(), nil
		}
	}
	return nil, errdefs.NotFoundf("container %s not found in pod %s/%s", name, namespace, pod)
}

// GetContainerLogs returns the container's environment, one NAME=value a
// line, sorted.
func (p *memProvider) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	ctx, span := trace.StartSpan(ctx, "memProvider.GetContainerLogs")
	defer span.End()
	c, err := p.container(namespace, podName, containerName)
	if err != nil {
		span.SetStatus(err)
		return nil, err
	}
	var lines []string
	for _, e := range c.Env {
		lines = append(lines, e.Name+"="+e.Value)
	}
	sort.Strings(lines)
	log.G(ctx).WithField("lines", len(lines)).Debug("serving logs")
	return io.NopCloser(strings.NewReader(strings.Join(lines, "\n") + "\n")), nil
}

// RunInContainer runs echo; anything else is not found.
func (p *memProvider) RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, attach api.AttachIO) error {
	if _, err := p.container(namespace, podName, containerName); err != nil {
		return err
	}
	if len(cmd) == 0 || cmd[0] != "echo" {
		return errdefs.InvalidInputf("only echo runs here, not %q", cmd)
	}
	if out := attach.Stdout(); out != nil {
		_, err := io.WriteString(out, strings.Join(cmd[1:], " ")+"\n")
		return err
	}
	return nil
}

func (p *memProvider) AttachToContainer(ctx context.Context, namespace, podName, containerName string, attach api.AttachIO) error {
	if _, err := p.container(namespace, podName, containerName); err != nil {
		return err
	}
	if out := attach.Stdout(); out != nil {
		_, err := io.WriteString(out, "attached to "+containerName+"\n")
		return err
	}
	return nil
}

// PortForward echoes what it receives.
func (p *memProvider) PortForward(ctx context.Context, namespace, pod string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	log.G(ctx).WithField("port", port).Info("port-forward")
	_, err := io.Copy(stream, stream)
	return err
}

func (p *memProvider) GetStatsSummary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	now := metav1.Now()
	s := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: "memory", StartTime: now}}
	pods, _ := p.GetPods(ctx)
	for _, pod := range pods {
		cpu := uint64(1_000_000)
		s.Pods = append(s.Pods, statsv1alpha1.PodStats{
			PodRef:    statsv1alpha1.PodReference{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID)},
			StartTime: now,
			CPU:       &statsv1alpha1.CPUStats{Time: now, UsageNanoCores: &cpu},
		})
	}
	return s, nil
}

func (p *memProvider) GetMetricsResource(ctx context.Context) ([]*dto.MetricFamily, error) {
	pods, _ := p.GetPods(ctx)
	return []*dto.MetricFamily{{
		Name:   ptr.To("memory_provider_pods"),
		Help:   ptr.To("Pods the memory provider runs."),
		Type:   dto.MetricType_GAUGE.Enum(),
		Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: ptr.To(float64(len(pods)))}}},
	}}, nil
}

func main() {
	var (
		nodeName   = flag.String("nodename", "", "name of the node")
		kubeconfig = flag.String("kubeconfig", "", "kubeconfig")
		listen     = flag.String("listen", "", "address:port of the kubelet API")
		cert       = flag.String("cert", "", "serving certificate")
		keyFile    = flag.String("key", "", "serving key")
		clientCA   = flag.String("client-ca", "", "CA of client certificates")
	)
	flag.Parse()
	if err := run(*nodeName, *kubeconfig, *listen, *cert, *keyFile, *clientCA); err != nil {
		fmt.Fprintln(os.Stderr, "provider:", err)
		os.Exit(1)
	}
}

func run(nodeName, kubeconfig, listen, cert, keyFile, clientCA string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	host, portText, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	client, err := nodeutil.ClientsetFromEnv(kubeconfig)
	if err != nil {
		return err
	}

	newProvider := func(cfg nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("8"),
			corev1.ResourceMemory: resource.MustParse("32Gi"),
			corev1.ResourcePods:   resource.MustParse("100"),
		}
		cfg.Node.Labels = map[string]string{"type": "virtual-kubelet"}
		cfg.Node.Status.Capacity = capacity
		cfg.Node.Status.Allocatable = capacity
		cfg.Node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: host}}
		cfg.Node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
		cfg.Node.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "memory provider is ready",
		}}
		return &memProvider{pods: map[string]*corev1.Pod{}, ip: host}, node.NewNaiveNodeProvider(), nil
	}

	mux := http.NewServeMux()
	n, err := nodeutil.NewNode(nodeName, newProvider,
		nodeutil.WithClient(client),
		nodeutil.AttachProviderRoutes(mux),
		nodeutil.WithTLSConfig(nodeutil.WithKeyPairFromPath(cert, keyFile), nodeutil.WithCAFromPath(clientCA)),
		func(cfg *nodeutil.NodeConfig) error {
			cfg.HTTPListenAddr = listen
			cfg.NumWorkers = 4
			auth, err := nodeutil.WebhookAuth(client, nodeName, func(c *nodeutil.WebhookAuthConfig) error {
				ca, err := dynamiccertificates.NewDynamicCAContentFromFile("client-ca", clientCA)
				c.AuthnConfig.ClientCertificateCAContentProvider = ca
				return err
			})
			if err != nil {
				return err
			}
			cfg.Handler = api.InstrumentHandler(nodeutil.WithAuth(nodeutil.InstrumentAuth(auth), mux))
			return nil
		},
	)
	if err != nil {
		return err
	}

	go func() {
		if err := n.WaitReady(ctx, time.Minute); err != nil {
			log.G(ctx).WithError(err).Error("node not ready")
			return
		}
		log.G(ctx).WithField("node", nodeName).Info("memory provider node ready")
	}()
	return n.Run(ctx)
}
