package slurm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// tenancy maps the node's pods to their tenants. A pod's tenant is decided
// once, when the provider first sees the pod, and kept until the pod is
// forgotten: a relabelled namespace maps its new pods anew, while a pod
// already there keeps the user its files and job belong to.
type tenancy struct {
	cfg *Config
	// namespaces lists the cluster's namespaces with their labels; nil
	// when no tenant has a namespaceSelector.
	namespaces corev1listers.NamespaceLister

	mu     sync.Mutex
	pinned map[types.UID]*tenant
}

// newTenancy watches the cluster's namespaces when a tenant selects them by
// label, and waits until it has listed them all.
func newTenancy(ctx context.Context, cfg *Config, client kubernetes.Interface) (*tenancy, error) {
	ts := &tenancy{cfg: cfg, pinned: map[types.UID]*tenant{}}
	if !cfg.selectsByLabel() {
		return ts, nil
	}
	if client == nil {
		return nil, errors.New("tenants: a namespaceSelector needs the daemon's API client to watch namespaces, and this process has none")
	}
	life := ctx.Done()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// Fail at once, naming the right, rather than wait a minute for an
	// informer that cannot list.
	if _, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return nil, fmt.Errorf("tenants: a namespaceSelector maps namespaces by their labels, so the daemon needs list and watch on namespaces: %w", err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(namespaceLabels))
	namespaces := factory.Core().V1().Namespaces()
	ts.namespaces = namespaces.Lister()
	namespaces.Informer()
	// The informer lives as long as the provider, not the wait.
	factory.Start(life)
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("tenants: the %v informer did not list the namespaces within a minute", typ)
		}
	}
	return ts, nil
}

// namespaceLabels keeps of a Namespace what the mapping reads.
func namespaceLabels(obj any) (any, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion, Labels: ns.Labels}}, nil
}

// resolve is the tenant the namespace maps to now.
func (ts *tenancy) resolve(namespace string) (*tenant, error) {
	var nsLabels map[string]string
	if _, named := ts.cfg.tenants[namespace]; ts.namespaces != nil && !named {
		ns, err := ts.namespaces.Get(namespace)
		if apierrors.IsNotFound(err) {
			// Its pod exists, so it does too: the watch is behind. Not
			// wrapped: the pod controller retries what is not NotFound.
			return nil, fmt.Errorf("namespace %q is not in the daemon's list of namespaces yet: its tenant is decided once it is", namespace)
		}
		if err != nil {
			return nil, fmt.Errorf("namespace %q: %v", namespace, err)
		}
		nsLabels = ns.Labels
	}
	return ts.cfg.tenantOf(namespace, nsLabels)
}

// of is the pod's tenant: the one decided when the provider first saw the
// pod, or else the one its namespace maps to now, kept from then on.
func (ts *tenancy) of(pod *corev1.Pod) (*tenant, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t, ok := ts.pinned[pod.UID]; ok {
		return t, nil
	}
	t, err := ts.resolve(pod.Namespace)
	if err != nil {
		return nil, err
	}
	ts.pinned[pod.UID] = t
	return t, nil
}

// adopt decides the tenant of a pod whose job a previous run of the daemon
// submitted as the user with uid submittedAs (0: not recorded): that
// user's tenant, even when the namespace maps to another one now.
func (ts *tenancy) adopt(ctx context.Context, pod *corev1.Pod, submittedAs uint32) (*tenant, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, err := ts.resolve(pod.Namespace)
	if submittedAs != 0 && (err != nil || t.uid != submittedAs) {
		was := ts.cfg.tenantWithUID(submittedAs)
		switch {
		case was != nil:
			log.G(ctx).Infof("pod %s/%s: its job runs as %s, which it keeps (its namespace maps to %v now)", pod.Namespace, pod.Name, was.name, nameOr(t, err))
			t, err = was, nil
		case err == nil:
			err = fmt.Errorf("its job runs as uid %d, which no tenant has any more (the namespace maps to %s now)", submittedAs, t.name)
		}
	}
	if err != nil {
		return nil, err
	}
	ts.pinned[pod.UID] = t
	return t, nil
}

// nameOr names the tenant, or the error that stands for it.
func nameOr(t *tenant, err error) string {
	if err != nil {
		return err.Error()
	}
	return t.name
}

// release forgets the pod's tenant: the pod is gone, or was refused.
func (ts *tenancy) release(uid types.UID) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.pinned, uid)
}
