//go:build e2e

package tenants_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/slurmtest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

// TestTenantByNamespaceLabel: tenants map namespaces by a label an
// administrator sets. A namespace labelled for tenant B runs its pods as
// vk-tenant-b; relabelled for tenant A, its new pods run as vk-tenant-a
// while the pod already running keeps vk-tenant-b; an unlabelled unmapped
// namespace, and one whose labels match both tenants, are refused, naming
// the namespace (and both tenants). The namespace's own admin cannot
// relabel it.
func TestTenantByNamespaceLabel(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	nsA, labelled, stray, both := c.Namespace(t), c.Namespace(t), c.Namespace(t), c.Namespace(t)
	// Values of this test's own: the daemon watches every namespace of
	// the shared cluster.
	key := "slurm-e2e.vkubelet.io/tenant"
	valA, valB := "a-"+labelled, "b-"+labelled
	n := slurmtest.NewNode(t, c, slurmtest.Tenants{slurmtest.TenantA: {nsA}})
	cfg, err := os.ReadFile(n.Config)
	if err != nil {
		t.Fatal(err)
	}
	// Tenant A maps nsA by name and more by label; tenant B by label only.
	cfg = []byte(strings.Replace(string(cfg), "- {user: "+slurmtest.TenantA+", namespaces: ["+nsA+"],",
		"- {user: "+slurmtest.TenantA+", namespaces: ["+nsA+"], namespaceSelector: {matchLabels: {"+key+": "+valA+"}},", 1) +
		"- {user: " + slurmtest.TenantB + ", namespaceSelector: {matchExpressions: [{key: " + key + "-b, operator: Exists}, {key: " + key + ", operator: In, values: [" + valB + "]}]}}\n" +
		"- {user: " + slurmtest.TenantB + ", namespaceSelector: {matchLabels: {" + key + "-both: \"yes\"}}}\n")
	if err := os.WriteFile(n.Config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	setLabels := func(ns string, labels map[string]any) {
		t.Helper()
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
		if _, err := c.Client.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setLabels(labelled, map[string]any{key: valB, key + "-b": ""})
	// Tenant A's label and the second B tenant's: two tenants match.
	setLabels(both, map[string]any{key: valA, key + "-both": "yes"})
	n.Start(t)
	n.WaitReady(t)

	uid := func(user string) string { return strconv.Itoa(int(slurmtest.TenantCredential(t, user).Uid)) }
	idOf := func(ns, pod string) string {
		t.Helper()
		return strings.TrimSpace(n.Kubectl(t, "-n", ns, "exec", pod, "--", "id", "-u"))
	}
	n.Create(t, n.Pod(labelled, "first", slurmtest.Shell("main", "sleep 3600")))
	n.WaitPod(t, labelled, "first", "Running", daemontest.Running)
	if got := idOf(labelled, "first"); got != uid(slurmtest.TenantB) {
		t.Errorf("a pod of the namespace labelled for tenant B runs as uid %s, want %s (%s)", got, uid(slurmtest.TenantB), slurmtest.TenantB)
	}

	rejected := func(ns, name string, want ...string) {
		t.Helper()
		p := n.WaitPod(t, ns, name, "rejected", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		for _, w := range want {
			if p.Status.Reason != "ProviderRejected" || !strings.Contains(p.Status.Message, w) {
				t.Errorf("pod %s/%s: reason %q message %q, want ProviderRejected naming %q", ns, name, p.Status.Reason, p.Status.Message, w)
			}
		}
	}
	n.Create(t, n.Pod(stray, "stray", slurmtest.Shell("main", "true")))
	n.Create(t, n.Pod(both, "both", slurmtest.Shell("main", "true")))
	rejected(stray, "stray", `namespace "`+stray+`"`)
	rejected(both, "both", `namespace "`+both+`"`, "tenants[0] (user "+slurmtest.TenantA+")", "tenants[2] (user "+slurmtest.TenantB+")")

	// The namespace's own admin (the usual RoleBinding to the admin
	// ClusterRole) cannot move it to another tenant: labels on a
	// Namespace need update on namespaces, which admin does not grant.
	if _, err := c.Client.RbacV1().RoleBindings(stray).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "mallory-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "mallory"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	conf := rest.CopyConfig(c.Config)
	conf.Impersonate = rest.ImpersonationConfig{UserName: "mallory"}
	mallory, err := kubernetes.NewForConfig(conf)
	if err != nil {
		t.Fatal(err)
	}
	// The control: mallory is the namespace's admin (RBAC may take a
	// moment to see the binding).
	slurmtest.Eventually(t, "mallory reads her namespace's pods", func() (bool, string) {
		_, err := mallory.CoreV1().Pods(stray).List(ctx, metav1.ListOptions{})
		return err == nil, errString(err)
	})
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{key: valB, key + "-b": ""}}})
	if _, err := mallory.CoreV1().Namespaces().Patch(ctx, stray, types.MergePatchType, patch, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the namespace's admin labelling it for tenant B: %v, want Forbidden", err)
	}

	// Relabelled for tenant A: new pods run as A, the running one stays B's.
	setLabels(labelled, map[string]any{key: valA, key + "-b": nil})
	slurmtest.Eventually(t, "a new pod of the relabelled namespace running as "+slurmtest.TenantA, func() (bool, string) {
		name := "second"
		if _, err := c.Client.CoreV1().Pods(labelled).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			n.Create(t, n.Pod(labelled, name, slurmtest.Shell("main", "sleep 3600")))
		}
		n.WaitPod(t, labelled, name, "Running", daemontest.Running)
		got := idOf(labelled, name)
		if got != uid(slurmtest.TenantA) {
			// The daemon may have seen the pod before the new labels:
			// try again with a new pod.
			_ = c.Client.CoreV1().Pods(labelled).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
			n.WaitGone(t, labelled, name)
		}
		return got == uid(slurmtest.TenantA), "uid " + got
	})
	if got := idOf(labelled, "first"); got != uid(slurmtest.TenantB) {
		t.Errorf("the pod running before the relabelling now runs as uid %s, want %s (%s)", got, uid(slurmtest.TenantB), slurmtest.TenantB)
	}
	// It is still B's to stop: its delete goes through as B.
	n.Kubectl(t, "-n", labelled, "delete", "pod", "first", "--wait=false")
	n.WaitGone(t, labelled, "first")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
