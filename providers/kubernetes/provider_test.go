package kubernetes

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// TestNamespacesOfB: a namespace the provider makes in B enforces its Pod
// Security level and is signed; one of that name it did not make is not
// used; one deleted in B behind its back is made again on the next
// attempt rather than leaving the pod Pending for ever.
func TestNamespacesOfB(t *testing.T) {
	ctx := context.Background()
	foreign := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a-theirs", Labels: map[string]string{LabelSourceNamespace: "theirs"}}}
	p, client, _ := objectsProvider(t, Config{NamespacePrefix: "a-", PodSecurity: "restricted"}, foreign)

	pod := restrictedPod()
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	ns, err := client.CoreV1().Namespaces().Get(ctx, "a-team", metav1.GetOptions{})
	if err != nil || ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" || ns.Labels["pod-security.kubernetes.io/enforce-version"] != "latest" ||
		!p.trust.ownsNamespace(ns) {
		t.Errorf("namespace made in B: %v %+v", err, ns)
	}

	theirs := restrictedPod()
	theirs.Namespace = "theirs"
	err = p.CreatePod(ctx, theirs)
	if !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), "namespace a-theirs exists in the remote cluster and was not made by the provider of cluster a") {
		t.Errorf("a namespace of B's: %v", err)
	}

	// B's namespace is deleted: the copy fails, then the retry makes the
	// namespace again.
	if err := client.CoreV1().Namespaces().Delete(ctx, "a-team", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	client.PrependReactor("create", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if _, err := client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("namespaces"), "", a.GetNamespace()); err != nil {
			return true, nil, apierrors.NewNotFound(corev1.Resource("namespaces"), a.GetNamespace())
		}
		return false, nil, nil
	})
	again := restrictedPod()
	again.Name, again.UID = "again", "uid-2"
	if err := p.CreatePod(ctx, again); !apierrors.IsNotFound(err) {
		t.Fatalf("copy into a deleted namespace: %v", err)
	}
	if err := p.CreatePod(ctx, again); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if _, err := client.CoreV1().Namespaces().Get(ctx, "a-team", metav1.GetOptions{}); err != nil {
		t.Errorf("the namespace was not made again: %v", err)
	}
}
