package kubernetes

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/internal/provider"
)

// TestCollectCopies: copies no pod in B uses are deleted, unless a pod
// creation copied them within copyGrace; a copy collected while B's
// informer still lists it is made again, not trusted to exist.
func TestCollectCopies(t *testing.T) {
	ctx := context.Background()
	names := namer{namespace: "from-a"}
	copyOf := func(name string, uid string) *corev1.ConfigMap {
		ns, n := names.remote("team", name)
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n, UID: k8stypes.UID(uid),
			Labels: map[string]string{LabelNode: "vk-b", LabelSourceNamespace: "team"}, Annotations: map[string]string{AnnotationSourceName: name}}}
	}
	unused, used, fresh := copyOf("unused", "u1"), copyOf("used", "u2"), copyOf("fresh", "u3")
	remote := fake.NewClientset(unused, used, fresh)
	remoteCMs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, c := range []*corev1.ConfigMap{unused, used, fresh} {
		if err := remoteCMs.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	localCMs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, name := range []string{"unused", "used", "fresh"} {
		if err := localCMs.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}, Data: map[string]string{"k": "v"}}); err != nil {
			t.Fatal(err)
		}
	}
	p := &Provider{
		cfg: &Config{}, names: names, nodeName: "vk-b", remote: remote,
		pods:  informers.NewSharedInformerFactory(remote, 0).Core().V1().Pods().Informer(),
		local: &provider.ResourceManager{ConfigMaps: corev1listers.NewConfigMapLister(localCMs)},
	}
	noSecrets := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	p.objects = newObjectSync(p, corev1listers.NewConfigMapLister(remoteCMs), corev1listers.NewSecretLister(noSecrets))
	podUsing := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p-" + name, UID: k8stypes.UID("uid-" + name)}, Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}}}}
	}
	if err := p.pods.GetStore().Add(p.remotePod(podUsing("used"))); err != nil {
		t.Fatal(err)
	}
	p.objects.copying("configmap", "team", []objectRef{{name: "fresh"}}) // a CreatePod in flight

	p.objects.collect(ctx)
	exists := func(c *corev1.ConfigMap) bool {
		_, err := remote.CoreV1().ConfigMaps(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	if exists(unused) || !exists(used) || !exists(fresh) {
		t.Fatalf("after collection: unused %v (want false), used %v, fresh %v (want true)", exists(unused), exists(used), exists(fresh))
	}

	// B's informer still lists the deleted copy: the resync leaves it
	// deleted, a pod using it again gets a new one.
	p.objects.resync(ctx)
	if exists(unused) {
		t.Error("the resync made a collected copy again")
	}
	if err := p.objects.copyFor(ctx, podUsing("unused")); err != nil {
		t.Fatal(err)
	}
	if !exists(unused) {
		t.Error("a collected copy was trusted to exist because B's informer still listed it")
	}
}
