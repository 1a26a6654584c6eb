package kubernetes

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/provider"
)

func newIndexer(t *testing.T, objs ...any) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if err := idx.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return idx
}

// objectsProvider is a test provider of cfg whose A holds ConfigMaps
// "unused", "used", "fresh", "settings" and Secret "creds" of namespace
// team, Secret kube-system/topsecret and the node's pods in the indexer
// returned (none at first), and whose B holds remote (also in B's
// informers).
func objectsProvider(t *testing.T, cfg Config, remote ...runtime.Object) (*Provider, *fake.Clientset, cache.Indexer) {
	t.Helper()
	var cms, secrets []any
	for _, o := range remote {
		switch o.(type) {
		case *corev1.ConfigMap:
			cms = append(cms, o)
		case *corev1.Secret:
			secrets = append(secrets, o)
		}
	}
	client := fake.NewClientset(remote...)
	p := testProvider(t, cfg)
	p.remote = client
	p.pods = informers.NewSharedInformerFactory(client, 0).Core().V1().Pods().Informer()
	var local []any
	for _, name := range []string{"unused", "used", "fresh", "settings"} {
		local = append(local, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}, Data: map[string]string{"k": "v"}})
	}
	localPods := newIndexer(t)
	p.local = &provider.ResourceManager{
		Pods:       corev1listers.NewPodLister(localPods),
		PodsSynced: func() bool { return true },
		ConfigMaps: corev1listers.NewConfigMapLister(newIndexer(t, local...)),
		Secrets: corev1listers.NewSecretLister(newIndexer(t,
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "topsecret"}, Data: map[string][]byte{"token": []byte("root")}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "creds"}, Data: map[string][]byte{"password": []byte("hunter2")}})),
	}
	p.objects = newObjectSync(p, corev1listers.NewConfigMapLister(newIndexer(t, cms...)), corev1listers.NewSecretLister(newIndexer(t, secrets...)))
	return p, client, localPods
}

// madeInB adds pod to A's pods of the node and the pod the provider makes
// of it to B's informer, and returns the latter.
func madeInB(t *testing.T, p *Provider, localPods cache.Indexer, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	remote, err := p.remotePod(pod)
	if err != nil {
		t.Fatal(err)
	}
	if err := localPods.Add(pod); err != nil {
		t.Fatal(err)
	}
	if err := p.pods.GetStore().Add(remote); err != nil {
		t.Fatal(err)
	}
	return remote
}

// copyOf is the copy this node makes in B of A's ConfigMap team/name.
func copyOf(t *testing.T, p *Provider, name, uid string) *corev1.ConfigMap {
	meta, err := p.copyMeta(kindConfigMap, "team", name)
	if err != nil {
		t.Fatal(err)
	}
	meta.UID = k8stypes.UID(uid)
	return &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"k": "v"}}
}

func podUsing(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p-" + name, UID: k8stypes.UID("uid-" + name)}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "i"}},
		Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}}}}
}

func exists(t *testing.T, client *fake.Clientset, c metav1.Object) bool {
	t.Helper()
	var err error
	switch c.(type) {
	case *corev1.ConfigMap:
		_, err = client.CoreV1().ConfigMaps(c.GetNamespace()).Get(context.Background(), c.GetName(), metav1.GetOptions{})
	case *corev1.Secret:
		_, err = client.CoreV1().Secrets(c.GetNamespace()).Get(context.Background(), c.GetName(), metav1.GetOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// TestCollectCopies: copies no pod in B uses are deleted, unless a pod
// creation used them within copyGrace; a copy collected while B's informer
// still lists it is made again, not trusted to exist.
func TestCollectCopies(t *testing.T) {
	ctx := context.Background()
	p0 := testProvider(t, Config{})
	unused, used, fresh := copyOf(t, p0, "unused", "u1"), copyOf(t, p0, "used", "u2"), copyOf(t, p0, "fresh", "u3")
	p, client, localPods := objectsProvider(t, Config{}, unused, used, fresh)
	madeInB(t, p, localPods, podUsing("used"))
	freshKey := copyKey(kindConfigMap, fresh.Namespace, fresh.Name)
	p.objects.use([]string{freshKey})() // a CreatePod just done with it

	p.objects.collect(ctx)
	if exists(t, client, unused) || !exists(t, client, used) || !exists(t, client, fresh) {
		t.Fatalf("after collection: unused %v (want false), used %v, fresh %v (want true)", exists(t, client, unused), exists(t, client, used), exists(t, client, fresh))
	}

	// B's informer still lists the deleted copy: the resync leaves it
	// deleted, a pod using it again gets a new one.
	p.objects.resync(ctx)
	if exists(t, client, unused) {
		t.Error("the resync made a collected copy again")
	}
	release, err := p.objects.copyFor(ctx, podUsing("unused"))
	if err != nil {
		t.Fatal(err)
	}
	release()
	if !exists(t, client, unused) {
		t.Error("a collected copy was trusted to exist because B's informer still listed it")
	}
}

// TestCollectionDoesNotBlockCreation: while the collection holds one copy,
// a pod creation using another proceeds; one using that copy waits for the
// deletion and then copies again.
func TestCollectionDoesNotBlockCreation(t *testing.T) {
	p, client, _ := objectsProvider(t, Config{})
	s := p.objects
	if !s.startCollecting("configmap/from-a/x") {
		t.Fatal("an unused copy was not collectable")
	}
	s.use([]string{"configmap/from-a/y"})() // would hang if collection held every creation off
	waited := make(chan struct{})
	go func() {
		s.use([]string{"configmap/from-a/x"})()
		close(waited)
	}()
	s.endCollecting("configmap/from-a/x", "uid", true)
	<-waited
	if s.startCollecting("configmap/from-a/x") {
		t.Error("a copy a creation just used was collectable")
	}
	// And a copy in use is never collected.
	release, err := s.copyFor(context.Background(), podUsing("used"))
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	c := copyOf(t, p, "used", "")
	if !exists(t, client, c) || s.startCollecting(copyKey(kindConfigMap, c.Namespace, c.Name)) {
		t.Error("a copy a creation is using was collectable")
	}
}

// TestForgedCopies: objects of B's users labelled as this node's copies
// or pods, even naming a Secret of A's kube-system, make nothing of A cross
// and nothing of B reach A, are never changed nor deleted, and an object of
// B under a copy's name fails the pod with a clear error.
func TestForgedCopies(t *testing.T) {
	ctx := context.Background()
	p0 := testProvider(t, Config{})
	forged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "from-a", Name: "steal", UID: "f1",
		Labels:      map[string]string{LabelNode: "vk-b", LabelSourceNamespace: "kube-system"},
		Annotations: map[string]string{AnnotationSourceName: "topsecret", AnnotationSignature: "forged"}}}
	meta, err := p0.copyMeta(kindSecret, "kube-system", "topsecret")
	if err != nil {
		t.Fatal(err)
	}
	replayed := &corev1.Secret{ObjectMeta: *meta.DeepCopy()} // our claim under another name
	replayed.Name, replayed.UID = "a.vk-b.kube-system.other", "f2"
	squatter := copyOf(t, p0, "used", "f3") // B's user took the name, signature and all but other content
	squatter.Annotations[AnnotationSignature] = "not ours"
	forgedPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "from-a", Name: "thief", UID: "f4",
		Labels:      map[string]string{LabelNode: "vk-b", LabelSourceNamespace: "kube-system", LabelSourceUID: "x"},
		Annotations: map[string]string{AnnotationSourceName: "thief"}},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "a.vk-b.kube-system.topsecret"}}}}}}
	p, client, _ := objectsProvider(t, Config{}, forged, replayed, squatter)
	if err := p.pods.GetStore().Add(forgedPod); err != nil {
		t.Fatal(err)
	}
	p.objects.resync(ctx)
	p.objects.collect(ctx)
	if exists(t, client, &corev1.Secret{ObjectMeta: meta}) {
		t.Error("A's kube-system/topsecret was copied to B for a forged object")
	}
	for _, o := range []metav1.Object{forged, replayed, squatter} {
		if !exists(t, client, o) {
			t.Errorf("%s, an object of B's users, was deleted", o.GetName())
		}
	}
	_, err = p.objects.copyFor(ctx, podUsing("used"))
	if !errdefs.IsInvalidInput(err) || err.Error() != "configmap from-a/a.vk-b.team.used exists in the remote cluster and was not made by node vk-b: it is not used" {
		t.Errorf("copy onto an object of B's users: %v", err)
	}
	got, _ := client.CoreV1().ConfigMaps("from-a").Get(ctx, squatter.Name, metav1.GetOptions{})
	if got.Annotations[AnnotationSignature] != "not ours" {
		t.Error("an object of B's users was overwritten")
	}
	// The forged pod feeds nothing to A.
	var notified []*corev1.Pod
	p.NotifyPods(ctx, func(pod *corev1.Pod) { notified = append(notified, pod) })
	p.remoteChanged(forgedPod)
	p.remoteDeleted(forgedPod)
	if pods, err := p.GetPods(ctx); err != nil || len(pods) != 0 || len(notified) != 0 {
		t.Errorf("a forged pod was taken for this node's: GetPods %v %v, notified %v", pods, err, notified)
	}
}

// TestInUseFromAPodsOnly: what is copied follows the specs of A's pods,
// ephemeral containers included, for the pods this node made in B. A
// writer in B who adds an ephemeral container to a signed pod, or makes
// the pod again with its metadata and another spec, naming the copy of a
// Secret of A no pod of A uses, gets nothing copied; nor does a pod of A
// the provider made no pod for in B.
func TestInUseFromAPodsOnly(t *testing.T) {
	ctx := context.Background()
	p, client, localPods := objectsProvider(t, Config{})
	stolen := "a.vk-b.team.creds" // the copy-to-be of team/creds, which no pod of A uses
	steal := corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: stolen}}}

	// B's pod of p-used, with an ephemeral container added in B.
	patched := madeInB(t, p, localPods, podUsing("used"))
	patched.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "steal", Image: "busybox", EnvFrom: []corev1.EnvFromSource{steal}}}}
	// B's pod of p-fresh, made again in B with its metadata and B's spec.
	recreated := madeInB(t, p, localPods, podUsing("fresh"))
	recreated.Spec = corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i", EnvFrom: []corev1.EnvFromSource{steal}}},
		Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: stolen}}}}}
	for _, pod := range []*corev1.Pod{patched, recreated} {
		if err := p.pods.GetStore().Update(pod); err != nil {
			t.Fatal(err)
		}
		if _, _, _, ok := p.trust.sourceOf(pod); !ok {
			t.Fatalf("B's pod %s no longer signed: the attack is not the one meant", pod.Name)
		}
	}
	// A's pod p-debug: its ephemeral container, which B's pod has not,
	// uses ConfigMap settings.
	debug := podUsing("unused")
	debug.Name, debug.UID = "p-debug", "uid-debug"
	debug.Spec.Volumes = nil
	debug.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "debug", Image: "busybox", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}}}}
	madeInB(t, p, localPods, debug)
	// A's pods using Secret creds have no pod of this node in B: one is
	// not there yet (or was refused), one is a new pod of an old one's
	// name, one is gone from A.
	usesCreds := func(name string) *corev1.Pod {
		pod := podUsing("unused")
		pod.Name, pod.UID = name, k8stypes.UID("uid-"+name)
		pod.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}}}
		return pod
	}
	if err := localPods.Add(usesCreds("p-pending")); err != nil {
		t.Fatal(err)
	}
	madeInB(t, p, localPods, usesCreds("p-replaced"))
	replaced := usesCreds("p-replaced")
	replaced.UID = "uid-new"
	if err := localPods.Update(replaced); err != nil {
		t.Fatal(err)
	}
	gone := usesCreds("p-gone")
	madeInB(t, p, localPods, gone)
	if err := localPods.Delete(gone); err != nil {
		t.Fatal(err)
	}

	want := map[string]sourceRef{
		"configmap/from-a/a.vk-b.team.used":     {kind: kindConfigMap, namespace: "team", name: "used"},
		"configmap/from-a/a.vk-b.team.fresh":    {kind: kindConfigMap, namespace: "team", name: "fresh"},
		"configmap/from-a/a.vk-b.team.settings": {kind: kindConfigMap, namespace: "team", name: "settings"},
	}
	got := p.objects.inUse()
	for key, ref := range got {
		if ref.pod == nil || ref.pod.Namespace != "team" {
			t.Errorf("%s: used by %v", key, ref.pod)
		}
		ref.pod = nil
		got[key] = ref
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("in use:\n got %v\nwant %v", got, want)
	}
	p.objects.resync(ctx)
	if exists(t, client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "from-a", Name: stolen}}) {
		t.Errorf("A's team/creds was copied to B as %s", stolen)
	}
	for _, name := range []string{"used", "fresh", "settings"} {
		if !exists(t, client, copyOf(t, p, name, "")) {
			t.Errorf("the copy of A's ConfigMap team/%s, which A's pods use, was not made", name)
		}
	}
}
