package nodeutil

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/node"
)

// TestObjectInformersShareOneHandler: every node's handlers see every
// ConfigMap and Secret event, a handler added after the sync gets the
// cached objects first, and a removed one gets nothing more (it ran in the
// same dispatch as a's, so had it still been there it would have got the
// delete a got).
func TestObjectInformersShareOneHandler(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	}
	client := fake.NewClientset(cm("old"))
	factory := informers.NewSharedInformerFactory(client, 0)
	objects, err := NewObjectInformers(factory)
	if err != nil {
		t.Fatal(err)
	}
	var cfgA, cfgB node.PodControllerConfig
	objects.Configure(&cfgA)
	objects.Configure(&cfgB)
	var a, b, sa seen
	regA, err := cfgA.ConfigMapInformer.Informer().AddEventHandler(a.handler())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfgA.SecretInformer.Informer().AddEventHandler(sa.handler()); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), regA.HasSynced) {
		t.Fatal("never synced")
	}
	regB, err := cfgB.ConfigMapInformer.Informer().AddEventHandler(b.handler())
	if err != nil {
		t.Fatal(err)
	}
	eventuallyEqual(t, "a's initial events", a.get, "add old")
	eventuallyEqual(t, "b's initial events (replayed)", b.get, "add old")

	if _, err := client.CoreV1().ConfigMaps("ns").Create(ctx, cm("new"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyEqual(t, "a's events", a.get, "add new", "add old")
	eventuallyEqual(t, "b's events", b.get, "add new", "add old")
	if _, err := client.CoreV1().Secrets("ns").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyEqual(t, "a's secret events", sa.get, "add s")

	if err := cfgB.ConfigMapInformer.Informer().RemoveEventHandler(regB); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().ConfigMaps("ns").Delete(ctx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyEqual(t, "a's events after the delete", a.get, "add new", "add old", "delete old")
	if got := b.get(); len(got) != 2 {
		t.Errorf("a removed handler got %v", got)
	}
	if _, err := cfgA.ConfigMapInformer.Lister().ConfigMaps("ns").Get("new"); err != nil {
		t.Errorf("lister: %v", err)
	}
}
