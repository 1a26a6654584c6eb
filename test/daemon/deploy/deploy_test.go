//go:build e2e

package deploy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/controlplane"
	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

const deployDir = "../../../hack/deploy"

// serviceAccountUser is the identity the manifests give the daemon.
const serviceAccountUser = "system:serviceaccount:virtual-kubelet:virtual-kubelet"

// applyManifests applies the base manifests, as a user would.
func applyManifests(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	daemontest.Kubectl(t, c, "apply", "-k", filepath.Join(deployDir, "base"))
}

// serviceAccountKubeconfig writes a kubeconfig for server with a token of the
// manifests' ServiceAccount, as a pod of the Deployment would hold.
func serviceAccountKubeconfig(t *testing.T, c *testcluster.Cluster, server string) string {
	t.Helper()
	tr, err := c.Client.CoreV1().ServiceAccounts("virtual-kubelet").CreateToken(context.Background(), "virtual-kubelet",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: c.Info.CAFile}
	cfg.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "sa"}
	cfg.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "sa.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestManifestsApply(t *testing.T) {
	c := testcluster.Shared(t)
	out := daemontest.Kubectl(t, c, "apply", "-k", filepath.Join(deployDir, "base"))
	for _, want := range []string{"namespace/virtual-kubelet", "serviceaccount/virtual-kubelet", "clusterrole.rbac.authorization.k8s.io/virtual-kubelet",
		"clusterrolebinding.rbac.authorization.k8s.io/virtual-kubelet", "role.rbac.authorization.k8s.io/virtual-kubelet",
		"rolebinding.rbac.authorization.k8s.io/virtual-kubelet", "deployment.apps/virtual-kubelet"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply -k base did not create %s:\n%s", want, out)
		}
	}
	// The kubeconfig variant is the same objects with a patched Deployment;
	// the API server validates it without replacing the base.
	out = daemontest.Kubectl(t, c, "apply", "-k", filepath.Join(deployDir, "kubeconfig"), "--dry-run=server")
	if !strings.Contains(out, "deployment.apps/virtual-kubelet configured (server dry run)") {
		t.Errorf("apply -k kubeconfig --dry-run=server:\n%s", out)
	}
	// The HA shape: the base with replicas sharing the nodes, a disruption
	// budget and the rights on the election's leases.
	out = daemontest.Kubectl(t, c, "apply", "-k", filepath.Join(deployDir, "ha"), "--dry-run=server")
	for _, want := range []string{"deployment.apps/virtual-kubelet configured (server dry run)", "poddisruptionbudget.policy/virtual-kubelet created (server dry run)",
		"role.rbac.authorization.k8s.io/virtual-kubelet-leader-elect created (server dry run)", "rolebinding.rbac.authorization.k8s.io/virtual-kubelet-leader-elect created (server dry run)"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply -k ha --dry-run=server: no %q:\n%s", want, out)
		}
	}
	dep, err := c.Client.AppsV1().Deployments("virtual-kubelet").Get(context.Background(), "virtual-kubelet", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
		if e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil {
			env[e.Name] = e.ValueFrom.ResourceFieldRef.Resource
		}
	}
	if env["VKUBELET_POD_IP"] != "status.podIP" || env["DEFAULT_NODE_NAME"] != "metadata.name" || env["GOMEMLIMIT"] != "limits.memory" {
		t.Errorf("downward API env: %v", env)
	}
}

// TestRBACIsSufficientAndMinimal runs the daemon with nothing but the
// manifests' ServiceAccount rights and checks a whole pod lifecycle works,
// then checks the account cannot do what the daemon does not need.
func TestRBACIsSufficientAndMinimal(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	applyManifests(t, c)
	ns := c.Namespace(t)
	kubeconfig := serviceAccountKubeconfig(t, c, c.Info.NodeServer)
	d := daemontest.Start(t, c, c.AddHost(t, testcluster.UniqueName("h")), "--kubeconfig", kubeconfig)
	daemontest.WaitNodeReady(t, c.Client, d.Name)

	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"MODE": "rbac"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{mock.AnnotationLogInterval: "50ms"}},
		Spec: corev1.PodSpec{NodeName: d.Name, Tolerations: daemontest.Tolerate, Containers: []corev1.Container{{
			Name: "c", Image: "busybox",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		}}},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.WaitPod(t, c.Client, ns, "p", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	time.Sleep(200 * time.Millisecond)
	if out := daemontest.Kubectl(t, c, "-n", ns, "logs", "p", "--tail=1"); !strings.Contains(out, "line") {
		t.Errorf("kubectl logs through the daemon: %q", out)
	}
	if out := daemontest.Kubectl(t, c, "-n", ns, "exec", "p", "--", "printenv", "MODE"); out != "rbac\n" {
		t.Errorf("env from the ConfigMap: %q", out)
	}
	if out := daemontest.Kubectl(t, c, "-n", ns, "exec", "p", "--", "cat", "/var/run/secrets/kubernetes.io/serviceaccount/namespace"); out != ns {
		t.Errorf("the service-account volume's namespace file: %q", out)
	}
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.Eventually(t, "pod deleted by the daemon", func() (bool, string) {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found"), fmt.Sprint(err)
	})
	if out := d.Output.String(); strings.Contains(strings.ToLower(out), "forbidden") {
		t.Errorf("the daemon was refused something it needs:\n%s", out)
	}

	// What the account may and may not do, asked of the API server.
	can := func(verb, group, resource, subresource, namespace string) bool {
		sar, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   serviceAccountUser,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:virtual-kubelet", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Group: group, Resource: resource, Subresource: subresource, Namespace: namespace,
			},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	for _, deny := range [][5]string{
		{"create", "", "pods", "", ns},
		{"update", "", "pods", "", ns},
		{"patch", "", "pods", "", ns},
		{"update", "", "secrets", "", ns},
		{"get", "", "serviceaccounts", "", ns},
		{"create", "", "serviceaccounts", "", ns},
		{"delete", "", "nodes", "", ""},
		{"create", "coordination.k8s.io", "leases", "", "default"},
		{"delete", "coordination.k8s.io", "leases", "", corev1.NamespaceNodeLease},
		{"update", "certificates.k8s.io", "certificatesigningrequests", "approval", ""},
		{"create", "apps", "deployments", "", ns},
		{"create", "", "pods", "eviction", ns},
	} {
		if can(deny[0], deny[1], deny[2], deny[3], deny[4]) {
			t.Errorf("the ServiceAccount may %s %s/%s (%s) in %q, which the daemon never does", deny[0], deny[2], deny[3], deny[1], deny[4])
		}
	}
}

// TestServingCertificateFromCSR runs the daemon with
// --rotate-server-certificates against an API server that verifies kubelet
// serving certificates: logs work only once the daemon's CSR is approved and
// signed by the controller-manager.
func TestServingCertificateFromCSR(t *testing.T) {
	c := testcluster.Private(t, func(cfg *controlplane.Config) { cfg.VerifyKubeletServingCerts = true })
	ctx := context.Background()
	applyManifests(t, c)
	ns := c.Namespace(t)
	kubeconfig := serviceAccountKubeconfig(t, c, c.Info.NodeServer)
	host := c.AddHost(t, testcluster.UniqueName("h"))
	certDir := t.TempDir()
	d := daemontest.Start(t, c, host, "--kubeconfig", kubeconfig, "--rotate-server-certificates", "--cert-dir", certDir)
	daemontest.WaitNodeReady(t, c.Client, d.Name)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec:       corev1.PodSpec{NodeName: d.Name, Tolerations: daemontest.Tolerate, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.WaitPod(t, c.Client, ns, "p", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	var csr *certificatesv1.CertificateSigningRequest
	daemontest.Eventually(t, "the daemon's CSR", func() (bool, string) {
		list, err := c.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for i := range list.Items {
			if list.Items[i].Spec.SignerName == certificatesv1.KubeletServingSignerName && list.Items[i].Spec.Username == serviceAccountUser {
				csr = &list.Items[i]
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d CSRs", len(list.Items))
	})
	// Not yet approved: the API server cannot reach the kubelet API.
	if out, err := c.Kubectl(ctx, "-n", ns, "logs", "p"); err == nil {
		t.Errorf("logs worked before the serving certificate was issued: %q", out)
	}

	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "E2E", Message: "approved by the test",
	})
	if _, err := c.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.Eventually(t, "logs through an API server that verifies the serving certificate", func() (bool, string) {
		out, err := c.Kubectl(ctx, "-n", ns, "logs", "p", "--tail=1")
		return err == nil && strings.Contains(out, "line"), out
	})
	signed, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
	if err != nil || len(signed.Status.Certificate) == 0 {
		t.Fatalf("CSR not signed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(certDir, "kubelet-server-current.pem")); err != nil {
		t.Errorf("the certificate was not stored in --cert-dir: %v", err)
	}
}

// TestBadKubeconfigSecret is the kubeconfig variant with a Secret that is
// missing its file or holds garbage: one clear line and a non-zero exit,
// not a crash loop of stack traces.
func TestBadKubeconfigSecret(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(garbage, []byte("apiVersion: v1\nclusters: {this is not a list"), 0o600); err != nil {
		t.Fatal(err)
	}
	noServer := filepath.Join(dir, "empty.kubeconfig")
	if err := os.WriteFile(noServer, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "missing", "kubeconfig"): "kubeconfig: stat " + filepath.Join(dir, "missing", "kubeconfig") + ": no such file or directory",
		garbage:  "kubeconfig " + garbage + ":",
		noServer: "kubeconfig " + noServer + ":",
	} {
		code, out := daemontest.Run(t, "--provider", "mock", "--nodename", "vk-bad", "--node-ip", "127.0.0.1", "--metrics-addr", "", "--kubeconfig", path)
		if code == 0 || strings.Contains(out, "\n") || !strings.Contains(out, want) || strings.Contains(out, "goroutine") {
			t.Errorf("--kubeconfig %s: exit %d:\n%s\nwant one line containing %q", path, code, out, want)
		}
	}
}
