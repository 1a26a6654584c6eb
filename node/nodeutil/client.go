package nodeutil

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordclientset "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vkubelet/virtual-kubelet/node"
)

// Client defaults of ClientsetFromEnv: the daemon's, sized for thousands of
// pods (client-go's own are 5 and 10), and protobuf as the kubelet speaks.
const (
	DefaultClientQPS   = 500
	DefaultClientBurst = 1000
)

// ClientsetFromEnv returns a clientset from the kubeconfig at
// kubeConfigPath, or if empty from $KUBECONFIG (a list is merged, as kubectl
// does), or else from the in-cluster service account. It speaks protobuf
// with DefaultClientQPS and DefaultClientBurst.
func ClientsetFromEnv(kubeConfigPath string) (*kubernetes.Clientset, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeConfigPath
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	cfg.QPS, cfg.Burst = DefaultClientQPS, DefaultClientBurst
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return kubernetes.NewForConfig(cfg)
}

// PodInformerFilter restricts an informer factory to the pods bound to the
// node named node.
func PodInformerFilter(node string) kubeinformers.SharedInformerOption {
	return kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	})
}

// FilterPodsForNodeName accepts the pods bound to the node named name, for
// a pod controller whose informer sees other pods too.
func FilterPodsForNodeName(name string) node.PodEventFilterFunc {
	return func(_ context.Context, p *corev1.Pod) bool { return p.Spec.NodeName == name }
}

// PodFilters accepts the pods every filter accepts.
func PodFilters(filters ...node.PodEventFilterFunc) node.PodEventFilterFunc {
	return func(ctx context.Context, p *corev1.Pod) bool {
		for _, f := range filters {
			if !f(ctx, p) {
				return false
			}
		}
		return true
	}
}

// NodeLeaseV1Client returns the client of the node leases, in
// kube-node-lease.
func NodeLeaseV1Client(client kubernetes.Interface) coordclientset.LeaseInterface {
	return client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
}

// NodePodCIDRs returns a PodControllerConfig.PodCIDRs reading the node's
// spec.podCIDRs (or the older spec.podCIDR) from the API server.
func NodePodCIDRs(nodes typedcorev1.NodeInterface, name string) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		return podCIDRsOf(n), nil
	}
}

// NodePodCIDRsFromLister returns a PodControllerConfig.PodCIDRs reading the
// node's pod CIDRs from an informer's cache of Nodes, as the kubelet reads
// them from its own Node watch: for the nodes of one process that share a
// Node informer, which would otherwise each read their Node from the API
// server every PodCIDRRetryInterval while they have none.
func NodePodCIDRsFromLister(nodes corev1listers.NodeLister, name string) func(context.Context) ([]string, error) {
	return func(context.Context) ([]string, error) {
		n, err := nodes.Get(name)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		return podCIDRsOf(n), nil
	}
}

func podCIDRsOf(n *corev1.Node) []string {
	if len(n.Spec.PodCIDRs) == 0 && n.Spec.PodCIDR != "" {
		return []string{n.Spec.PodCIDR}
	}
	return n.Spec.PodCIDRs
}
