package slurm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// labelledTenants maps namespace "named" to nobody by name, and namespaces
// labelled tenant=b to daemon (uid 1), tenant=nb to nobody, by selector.
const labelledTenants = `tenants:
- {user: nobody, namespaces: [named], namespaceSelector: {matchLabels: {tenant: nb}}}
- {user: daemon, namespaceSelector: {matchExpressions: [{key: tenant, operator: In, values: [b, bb]}]}}
`

func loadTenants(t *testing.T, tenants string) *Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("workDir: /srv/vk\nimages: {busybox: {host: true}}\n"+tenants), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestTenantOfByLabel: a namespace maps by its name first, else by the one
// selector its labels match; none, or two, is a refusal naming the
// namespace (and the two tenants).
func TestTenantOfByLabel(t *testing.T) {
	cfg := loadTenants(t, labelledTenants+"- {user: bin, namespaceSelector: {matchLabels: {tenant: bb}}}\n")
	for _, tc := range []struct {
		name, ns string
		labels   map[string]string
		user     string // "": refused
		refusal  []string
	}{
		{"by name", "named", nil, "nobody", nil},
		{"by name whatever the labels", "named", map[string]string{"tenant": "b"}, "nobody", nil},
		{"by matchLabels", "x", map[string]string{"tenant": "nb", "other": "y"}, "nobody", nil},
		{"by matchExpressions", "y", map[string]string{"tenant": "b"}, "daemon", nil},
		{"unlabelled", "z", nil, "", []string{`namespace "z" is mapped to no tenant`}},
		{"another value", "z", map[string]string{"tenant": "c"}, "", []string{`namespace "z" is mapped to no tenant`}},
		{"two selectors", "w", map[string]string{"tenant": "bb"}, "", []string{`namespace "w"`, "tenants[1] (user daemon)", "tenants[2] (user bin)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cfg.tenantOf(tc.ns, tc.labels)
			if tc.user != "" {
				if err != nil || got.user != tc.user {
					t.Fatalf("got %+v, %v; want user %s", got, err, tc.user)
				}
				return
			}
			if !errdefs.IsInvalidInput(err) {
				t.Fatalf("got %+v, %v; want a refusal (ProviderRejected)", got, err)
			}
			for _, want := range tc.refusal {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestTenantSelectorConfigErrors(t *testing.T) {
	good := "workDir: /srv/vk\nimages: {busybox: {host: true}}\n"
	for _, tc := range []struct{ name, data, want string }{
		{"empty selector", "tenants: [{user: nobody, namespaceSelector: {}}]", "tenants[0].namespaceSelector: an empty selector matches every namespace"},
		{"bad operator", "tenants: [{user: nobody, namespaceSelector: {matchExpressions: [{key: a, operator: Near}]}}]", `tenants[0].namespaceSelector: "Near" is not a valid label selector operator`},
		{"bad label", "tenants: [{user: nobody, namespaceSelector: {matchLabels: {\"a b\": c}}}]", "tenants[0].namespaceSelector: "},
		{"neither", "tenants: [{user: nobody}]", "tenants[0].namespaces: name at least one namespace, or set namespaceSelector"},
		// However a tenant maps namespaces, root is refused.
		{"root by label", "tenants: [{user: root, namespaceSelector: {matchLabels: {a: b}}}]", `tenants[0].user: "root" is root (uid 0)`},
		{"root uid by label", "tenants: [{user: nobody, namespaces: [x]}, {user: \"0\", namespaceSelector: {matchLabels: {a: b}}}]", `tenants[1].user: "0" is root (uid 0)`},
		{"root group by label", "tenants: [{user: nobody, group: root, namespaceSelector: {matchLabels: {a: b}}}]", `tenants[0].group: the group of "nobody" is root`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(good+tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadConfig(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func podIn(ns string, uid types.UID) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", UID: uid}}
}

// TestTenancyFollowsLabels: the daemon's namespace informer maps a
// namespace by its labels as they are now; a relabelled namespace maps its
// new pods to the new tenant, while a pod already seen keeps its tenant;
// an adopted pod keeps the user its job was submitted as.
func TestTenancyFollowsLabels(t *testing.T) {
	cfg := loadTenants(t, labelledTenants)
	client := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lab", Labels: map[string]string{"tenant": "nb"}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts, err := newTenancy(ctx, cfg, client)
	if err != nil {
		t.Fatal(err)
	}
	old, err := ts.of(podIn("lab", "old"))
	if err != nil || old.user != "nobody" {
		t.Fatalf("labelled tenant=nb: %+v, %v", old, err)
	}
	if _, err := client.CoreV1().Namespaces().Update(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lab", Labels: map[string]string{"tenant": "b"}}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		t2, err := ts.of(podIn("lab", types.UID("new-"+time.Now().Format("150405.000000"))))
		if err == nil && t2.user == "daemon" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a new pod after relabelling to tenant=b: %+v, %v", t2, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if again, err := ts.of(podIn("lab", "old")); err != nil || again != old {
		t.Errorf("the pod seen before the relabelling: %+v, %v; want it kept as %s", again, err, old.name)
	}
	// Released (the pod gone), the same UID would map anew.
	ts.release("old")
	if again, err := ts.of(podIn("lab", "old")); err != nil || again.user != "daemon" {
		t.Errorf("after release: %+v, %v", again, err)
	}
	// A restarted daemon keeps the user a job was submitted as.
	adopted, err := ts.adopt(ctx, podIn("lab", "adopted"), old.uid)
	if err != nil || adopted.uid != old.uid {
		t.Errorf("adopting a job submitted as %s: %+v, %v", old.name, adopted, err)
	}
	if _, err := ts.adopt(ctx, podIn("lab", "lost"), 4242); err == nil || !strings.Contains(err.Error(), "uid 4242, which no tenant has") {
		t.Errorf("adopting a job of a user no tenant has: %v", err)
	}
	// A namespace the informer has not seen yet: retried, not refused.
	if _, err := ts.of(podIn("brand-new", "x")); err == nil || errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), `namespace "brand-new" is not in the daemon's list`) {
		t.Errorf("an unknown namespace: %v", err)
	}
}

// TestTenancyNeedsNamespaceRights: without list on namespaces the daemon
// refuses to start, naming the right; without selectors it does not list.
func TestTenancyNeedsNamespaceRights(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("namespaces"), "", errors.New("no"))
	})
	if _, err := newTenancy(context.Background(), loadTenants(t, labelledTenants), client); err == nil || !strings.Contains(err.Error(), "needs list and watch on namespaces") {
		t.Errorf("selectors without the right: %v", err)
	}
	if _, err := newTenancy(context.Background(), loadTenants(t, "tenants: [{user: nobody, namespaces: [a]}]\n"), client); err != nil {
		t.Errorf("names only: %v", err)
	}
	if _, err := newTenancy(context.Background(), loadTenants(t, labelledTenants), nil); err == nil || !strings.Contains(err.Error(), "needs the daemon's API client") {
		t.Errorf("no client: %v", err)
	}
}
