package controlplane

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// MetricsServerUser is the user metrics-server authenticates as, to the
// apiserver and to kubelets, with a client certificate of the cluster CA.
const MetricsServerUser = "system:metrics-server"

// MetricResolution is how often metrics-server scrapes the nodes: its
// minimum, so that `kubectl top` follows a pod's figures closely.
const MetricResolution = 10 * time.Second

// metricsAPIService is the APIService metrics-server serves.
const metricsAPIService = "v1beta1.metrics.k8s.io"

var apiServiceResource = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

func (c *ControlPlane) metricsServerURL() string {
	return "https://" + netip.AddrPortFrom(c.cfg.NodeNetwork.Gateway, uint16(c.cfg.MetricsServerPort)).String()
}

func (c *ControlPlane) metricsServerArgs() []string {
	cfg, p := c.cfg, c.pki
	kubeconfig := filepath.Join(c.info.Dir, MetricsServer+".kubeconfig")
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		// On the gateway, an address the aggregator may be routed to
		// (EndpointSlices reject loopback).
		"--bind-address=" + cfg.NodeNetwork.Gateway.String(),
		"--secure-port=" + strconv.Itoa(cfg.MetricsServerPort),
		"--tls-cert-file=" + p.leafCert(metricsServerServing),
		"--tls-private-key-file=" + p.leafKey(metricsServerServing),
		"--metric-resolution=" + MetricResolution.String(),
		// Below 90% of the resolution, as metrics-server requires.
		"--kubelet-request-timeout=5s",
		// Node hosts are reached at their InternalIP, on the port their
		// Node reports, with a client certificate, as in a real cluster.
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-use-node-status-port",
		"--kubelet-client-certificate=" + p.leafCert(MetricsServer),
		"--kubelet-client-key=" + p.leafKey(MetricsServer),
		// Verbosity 1 logs a scrape that lacks a figure, as well as each
		// scrape's start and end.
		"--v=1",
	}
	if cfg.VerifyKubeletServingCerts {
		args = append(args, "--kubelet-certificate-authority="+p.caCert())
	} else {
		args = append(args, "--kubelet-insecure-tls")
	}
	return args
}

// startMetricsServer creates what metrics-server needs in the cluster (RBAC,
// a Service whose EndpointSlice points at the gateway, the APIService),
// starts it and waits until the aggregator reports the APIService
// available.
func (c *ControlPlane) startMetricsServer(ctx context.Context) error {
	cfg, err := c.info.RESTConfig()
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(c.pki.caCert())
	if err != nil {
		return err
	}
	if err := c.createMetricsServerObjects(ctx, client, dyn, ca); err != nil {
		return fmt.Errorf("creating metrics-server's objects: %w", err)
	}
	if err := c.StartComponent(ctx, MetricsServer); err != nil {
		return err
	}
	c.info.MetricsServer = c.metricsServerURL()
	var last string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, startupTimeout, true, func(ctx context.Context) (bool, error) {
		if p := c.components[MetricsServer]; p.Exited() {
			return false, fmt.Errorf("exited: %w", p.exitErr())
		}
		obj, err := dyn.Resource(apiServiceResource).Get(ctx, metricsAPIService, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, cond := range conditions {
			m, _ := cond.(map[string]any)
			if m["type"] == "Available" {
				last = fmt.Sprintf("Available=%v: %v", m["status"], m["message"])
				return m["status"] == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s did not become available: %w (last: %s; log: %s)", metricsAPIService, err, last, c.info.LogFile(MetricsServer))
	}
	return nil
}

// createMetricsServerObjects creates, as metrics-server's own manifests do,
// its RBAC, Service and APIService; and, since no controller knows where a
// process outside the cluster listens, the Service's EndpointSlice.
func (c *ControlPlane) createMetricsServerObjects(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, ca []byte) error {
	const ns = metav1.NamespaceSystem
	user := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: MetricsServerUser}}
	read := []string{"get", "list", "watch"}
	clusterRoles := []*rbacv1.ClusterRole{
		{
			ObjectMeta: metav1.ObjectMeta{Name: MetricsServerUser},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}},
				{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: read},
			},
		},
		{
			// Lets the view, edit and admin roles read the metrics.
			ObjectMeta: metav1.ObjectMeta{Name: "system:aggregated-metrics-reader", Labels: map[string]string{
				"rbac.authorization.k8s.io/aggregate-to-view":  "true",
				"rbac.authorization.k8s.io/aggregate-to-edit":  "true",
				"rbac.authorization.k8s.io/aggregate-to-admin": "true",
			}},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"pods", "nodes"}, Verbs: read}},
		},
	}
	clusterRoleBindings := []*rbacv1.ClusterRoleBinding{
		{
			ObjectMeta: metav1.ObjectMeta{Name: MetricsServerUser},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: MetricsServerUser},
			Subjects:   user,
		},
		{
			// Delegated authentication and authorization of its callers.
			ObjectMeta: metav1.ObjectMeta{Name: "metrics-server:system:auth-delegator"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
			Subjects:   user,
		},
	}
	// Reading the front-proxy CA and header names the apiserver publishes.
	authReader := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-server-auth-reader", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
		Subjects:   user,
	}
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: MetricsServer, Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(int32(c.cfg.MetricsServerPort)),
		}}},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: MetricsServer, Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: MetricsServer,
			discoveryv1.LabelManagedBy:   "virtual-kubelet-controlplane",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{c.cfg.NodeNetwork.Gateway.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(c.cfg.MetricsServerPort)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": metricsAPIService},
		"spec": map[string]any{
			"group":                "metrics.k8s.io",
			"version":              "v1beta1",
			"service":              map[string]any{"namespace": ns, "name": MetricsServer, "port": int64(443)},
			"caBundle":             base64.StdEncoding.EncodeToString(ca),
			"groupPriorityMinimum": int64(100),
			"versionPriority":      int64(100),
		},
	}}

	rbac := client.RbacV1()
	opts := metav1.CreateOptions{}
	var creates []func() error
	for _, r := range clusterRoles {
		creates = append(creates, func() error { _, err := rbac.ClusterRoles().Create(ctx, r, opts); return err })
	}
	for _, b := range clusterRoleBindings {
		creates = append(creates, func() error { _, err := rbac.ClusterRoleBindings().Create(ctx, b, opts); return err })
	}
	creates = append(creates,
		func() error { _, err := rbac.RoleBindings(ns).Create(ctx, authReader, opts); return err },
		func() error { _, err := client.CoreV1().Services(ns).Create(ctx, service, opts); return err },
		func() error { _, err := client.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, opts); return err },
		func() error { _, err := dyn.Resource(apiServiceResource).Create(ctx, apiService, opts); return err },
	)
	for _, create := range creates {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}
