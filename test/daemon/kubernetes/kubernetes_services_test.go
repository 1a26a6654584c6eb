//go:build e2e

package kubernetes_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	k8sprovider "github.com/vkubelet/virtual-kubelet/providers/kubernetes"
)

// TestKubernetesProviderServices: a Deployment of A with a Service, its
// pods offloaded to B; in B the Service is there, selector-less, with its
// ports, and its EndpointSlice (the provider's) holds the offloaded pods'
// addresses; a Service no offloaded pod uses is not reflected, nor one of
// another namespace of A whose selector matches the pods' labels but no
// offloaded pod of its namespace; deleting the Service in A deletes its
// reflection.
func TestKubernetesProviderServices(t *testing.T) {
	tc := startTwoClusters(t)
	ctx := context.Background()
	other := tc.a.Namespace(t) // a namespace of A with no offloaded pod

	service := func(name string, selector map[string]string) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
		}
	}
	for ns, svc := range map[string]*corev1.Service{
		tc.ns: service("web", map[string]string{"app": "web"}),
		other: service("web-elsewhere", map[string]string{"app": "web"}),
	} {
		if _, err := tc.a.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tc.a.Client.CoreV1().Services(tc.ns).Create(ctx, service("unused", map[string]string{"app": "nobody"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deploy := daemontest.DeploymentOn(tc.node.Name, "web", 2, nil, corev1.Container{Name: "web", Image: "nginx"})
	if _, err := tc.a.Client.AppsV1().Deployments(tc.ns).Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// podIPs are the IPs A shows for the Deployment's Running pods (B's).
	podIPs := func() []string {
		pods, err := tc.a.Client.CoreV1().Pods(tc.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		var ips []string
		for _, p := range pods.Items {
			if isRunning(&p) && p.DeletionTimestamp == nil {
				ips = append(ips, p.Status.PodIP)
			}
		}
		sort.Strings(ips)
		return ips
	}
	// remoteAddresses are the ready addresses of B's slices of the Service.
	remoteAddresses := func(name string) ([]string, []discoveryv1.EndpointSlice) {
		list, err := tc.b.Client.DiscoveryV1().EndpointSlices(tc.remoteNS).List(ctx, metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name}).String(),
		})
		if err != nil {
			t.Fatal(err)
		}
		var addrs []string
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					addrs = append(addrs, e.Addresses...)
				}
			}
		}
		sort.Strings(addrs)
		return addrs, list.Items
	}

	t.Run("the Service and its EndpointSlice are in B with the offloaded pods' addresses", func(t *testing.T) {
		daemontest.Eventually(t, "B's EndpointSlice of web holds the 2 offloaded pods' IPs", func() (bool, string) {
			ips := podIPs()
			addrs, _ := remoteAddresses("web")
			return len(ips) == 2 && slices.Equal(ips, addrs), fmt.Sprintf("A's pods %v, B's slice %v", ips, addrs)
		})
		svc, err := tc.b.Client.CoreV1().Services(tc.remoteNS).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(svc.Spec.Selector) != 0 || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].TargetPort.IntVal != 8080 ||
			svc.Spec.ClusterIP == "" || svc.Labels[k8sprovider.LabelNode] != tc.node.Name {
			t.Errorf("B's Service web: selector %v, ports %+v, clusterIP %q, labels %v", svc.Spec.Selector, svc.Spec.Ports, svc.Spec.ClusterIP, svc.Labels)
		}
		_, slices := remoteAddresses("web")
		for _, s := range slices {
			if s.Labels[discoveryv1.LabelManagedBy] != k8sprovider.ManagedBy || len(s.Ports) != 1 || s.Ports[0].Port == nil || *s.Ports[0].Port != 8080 {
				t.Errorf("B's EndpointSlice %s: labels %v, ports %+v", s.Name, s.Labels, s.Ports)
			}
		}
	})

	t.Run("Services no offloaded pod uses are not reflected", func(t *testing.T) {
		// The web reflection is done: a round has looked at them all.
		for _, name := range []string{"unused", "web-elsewhere"} {
			list, err := tc.b.Client.CoreV1().Services("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != 0 {
				t.Errorf("Service %s reflected into B: %s/%s", name, list.Items[0].Namespace, list.Items[0].Name)
			}
			if addrs, _ := remoteAddresses(name); len(addrs) != 0 {
				t.Errorf("EndpointSlices of %s in B: %v", name, addrs)
			}
		}
	})

	t.Run("scaling follows", func(t *testing.T) {
		if out, err := tc.kubectl("", "scale", "deployment/web", "--replicas=3"); err != nil {
			t.Fatalf("kubectl scale: %v\n%s", err, out)
		}
		daemontest.Eventually(t, "B's EndpointSlice of web holds the 3 offloaded pods' IPs", func() (bool, string) {
			ips := podIPs()
			addrs, _ := remoteAddresses("web")
			return len(ips) == 3 && slices.Equal(ips, addrs), fmt.Sprintf("A's pods %v, B's slice %v", ips, addrs)
		})
	})

	t.Run("deleting the Service in A deletes its reflection", func(t *testing.T) {
		if err := tc.a.Client.CoreV1().Services(tc.ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		daemontest.Eventually(t, "B's Service web and its slices gone", func() (bool, string) {
			_, err := tc.b.Client.CoreV1().Services(tc.remoteNS).Get(ctx, "web", metav1.GetOptions{})
			_, slices := remoteAddresses("web")
			return apierrors.IsNotFound(err) && len(slices) == 0, fmt.Sprintf("Service: %v; %d slices", err, len(slices))
		})
	})
}
