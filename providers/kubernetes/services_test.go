package kubernetes

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1listers "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// servicesProvider is a test provider whose A holds Services web (selects
// app=web), db (app=db, labelled expose=b), headless (app=web, no cluster
// IP) of namespace team and web of namespace other, and whose pod of team
// labelled app=web is offloaded.
func servicesProvider(t *testing.T, services ServicesConfig) *serviceReflector {
	t.Helper()
	p, _, localPods := objectsProvider(t, Config{Services: services})
	svc := func(ns, name string, selector map[string]string, labels map[string]string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Port: 80}}}}
	}
	headless := svc("team", "headless", map[string]string{"app": "web"}, nil)
	headless.Spec.ClusterIP = corev1.ClusterIPNone
	localServices := newIndexer(t,
		svc("team", "web", map[string]string{"app": "web"}, nil),
		svc("team", "db", map[string]string{"app": "db"}, map[string]string{"expose": "b"}),
		headless,
		svc("other", "web", map[string]string{"app": "web"}, nil))
	pod := podUsing("used")
	pod.Labels = map[string]string{"app": "web"}
	madeInB(t, p, localPods, pod)
	r, err := newServiceReflector(p, corev1listers.NewServiceLister(localServices), discoverylisters.NewEndpointSliceLister(newIndexer(t)),
		corev1listers.NewServiceLister(newIndexer(t)), discoverylisters.NewEndpointSliceLister(newIndexer(t)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestServicesWanted: only Services of namespaces with an offloaded pod
// are reflected, as the config selects them; a Service of another
// namespace never is, whatever its selector.
func TestServicesWanted(t *testing.T) {
	for _, tt := range []struct {
		name     string
		services ServicesConfig
		want     []string
	}{
		{"used (default)", ServicesConfig{}, []string{"from-a/headless", "from-a/web"}},
		{"all", ServicesConfig{Select: SelectAll}, []string{"from-a/db", "from-a/headless", "from-a/web"}},
		{"all, by label", ServicesConfig{Select: SelectAll, LabelSelector: "expose=b"}, []string{"from-a/db"}},
		{"by namespace", ServicesConfig{Select: SelectAll, Namespaces: []string{"other"}}, nil},
		{"none", ServicesConfig{Select: SelectNone}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := servicesProvider(t, tt.services)
			want := r.wanted(context.Background())
			got := slices.Sorted(maps.Keys(want))
			if !slices.Equal(got, tt.want) {
				t.Errorf("reflected %v, want %v", got, tt.want)
			}
			for place, w := range want {
				if w.svc.Namespace != "team" || w.pod == nil || w.pod.Namespace != "team" {
					t.Errorf("%s: Service %s/%s for pod %v", place, w.svc.Namespace, w.svc.Name, w.pod)
				}
			}
		})
	}
}

// TestServicesReflected: the reflection in B is selector-less, with A's
// ports, headless if A's is; past the node's bounds it is not written.
func TestServicesReflected(t *testing.T) {
	ctx := context.Background()
	r := servicesProvider(t, ServicesConfig{})
	r.reconcile(ctx)
	list, err := r.p.remote.CoreV1().Services("from-a").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]corev1.Service{}
	for _, s := range list.Items {
		byName[s.Name] = s
	}
	web, headless := byName["web"], byName["headless"]
	if len(byName) != 2 || web.Spec.Selector != nil || len(web.Spec.Ports) != 1 || web.Spec.Ports[0].TargetPort != intstr.FromInt32(80) ||
		headless.Spec.ClusterIP != corev1.ClusterIPNone || !r.p.trust.ownsCopy(kindService, &web) {
		t.Fatalf("B's Services: %+v", byName)
	}

	bounded := servicesProvider(t, ServicesConfig{})
	bounded.p.budget = newReflectionBudget(1, 1<<20)
	w := bounded.wanted(ctx)["from-a/web"]
	if err := bounded.reflect(ctx, w, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	w = bounded.wanted(ctx)["from-a/headless"]
	if err := bounded.reflect(ctx, w, map[string]bool{}); !errors.Is(err, errReflectionLimit) {
		t.Fatalf("a second Service past maxObjects 1: %v", err)
	}
}

// TestManagedByIsALabelValue: B's API server refuses a slice whose
// managed-by is not a label value.
func TestManagedByIsALabelValue(t *testing.T) {
	if errs := validation.IsValidLabelValue(ManagedBy); len(errs) > 0 {
		t.Fatal(errs)
	}
}
