//go:build e2e

package e2e_test

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
	n := newSlurmNode(t, c, tenants{tenantA: {nsA}})
	cfg, err := os.ReadFile(n.config)
	if err != nil {
		t.Fatal(err)
	}
	// Tenant A maps nsA by name and more by label; tenant B by label only.
	cfg = []byte(strings.Replace(string(cfg), "- {user: "+tenantA+", namespaces: ["+nsA+"],",
		"- {user: "+tenantA+", namespaces: ["+nsA+"], namespaceSelector: {matchLabels: {"+key+": "+valA+"}},", 1) +
		"- {user: " + tenantB + ", namespaceSelector: {matchExpressions: [{key: " + key + "-b, operator: Exists}, {key: " + key + ", operator: In, values: [" + valB + "]}]}}\n" +
		"- {user: " + tenantB + ", namespaceSelector: {matchLabels: {" + key + "-both: \"yes\"}}}\n")
	if err := os.WriteFile(n.config, cfg, 0o600); err != nil {
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
	n.start(t)
	n.waitReady(t)

	uid := func(user string) string { return strconv.Itoa(int(tenantCredential(t, user).Uid)) }
	idOf := func(ns, pod string) string {
		t.Helper()
		return strings.TrimSpace(n.kubectl(t, "-n", ns, "exec", pod, "--", "id", "-u"))
	}
	n.create(t, n.pod(labelled, "first", shell("main", "sleep 3600")))
	n.waitPod(t, labelled, "first", "Running", running)
	if got := idOf(labelled, "first"); got != uid(tenantB) {
		t.Errorf("a pod of the namespace labelled for tenant B runs as uid %s, want %s (%s)", got, uid(tenantB), tenantB)
	}

	rejected := func(ns, name string, want ...string) {
		t.Helper()
		p := n.waitPod(t, ns, name, "rejected", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		for _, w := range want {
			if p.Status.Reason != "ProviderRejected" || !strings.Contains(p.Status.Message, w) {
				t.Errorf("pod %s/%s: reason %q message %q, want ProviderRejected naming %q", ns, name, p.Status.Reason, p.Status.Message, w)
			}
		}
	}
	n.create(t, n.pod(stray, "stray", shell("main", "true")))
	n.create(t, n.pod(both, "both", shell("main", "true")))
	rejected(stray, "stray", `namespace "`+stray+`"`)
	rejected(both, "both", `namespace "`+both+`"`, "tenants[0] (user "+tenantA+")", "tenants[2] (user "+tenantB+")")

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
	eventually(t, "mallory reads her namespace's pods", func() (bool, string) {
		_, err := mallory.CoreV1().Pods(stray).List(ctx, metav1.ListOptions{})
		return err == nil, errString(err)
	})
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{key: valB, key + "-b": ""}}})
	if _, err := mallory.CoreV1().Namespaces().Patch(ctx, stray, types.MergePatchType, patch, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the namespace's admin labelling it for tenant B: %v, want Forbidden", err)
	}

	// Relabelled for tenant A: new pods run as A, the running one stays B's.
	setLabels(labelled, map[string]any{key: valA, key + "-b": nil})
	eventually(t, "a new pod of the relabelled namespace running as "+tenantA, func() (bool, string) {
		name := "second"
		if _, err := c.Client.CoreV1().Pods(labelled).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			n.create(t, n.pod(labelled, name, shell("main", "sleep 3600")))
		}
		n.waitPod(t, labelled, name, "Running", running)
		got := idOf(labelled, name)
		if got != uid(tenantA) {
			// The daemon may have seen the pod before the new labels:
			// try again with a new pod.
			_ = c.Client.CoreV1().Pods(labelled).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
			waitGone(t, c, labelled, name)
		}
		return got == uid(tenantA), "uid " + got
	})
	if got := idOf(labelled, "first"); got != uid(tenantB) {
		t.Errorf("the pod running before the relabelling now runs as uid %s, want %s (%s)", got, uid(tenantB), tenantB)
	}
	// It is still B's to stop: its delete goes through as B.
	n.kubectl(t, "-n", labelled, "delete", "pod", "first", "--wait=false")
	waitGone(t, c, labelled, "first")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
