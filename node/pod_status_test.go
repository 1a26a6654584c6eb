package node

import (
	"context"
	"errors"
	"testing"

	"github.com/vkubelet/virtual-kubelet/node/queue"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

// nopProvider runs nothing; these tests exercise the controller's own paths.
type nopProvider struct{}

func (nopProvider) CreatePod(context.Context, *corev1.Pod) error                { return nil }
func (nopProvider) UpdatePod(context.Context, *corev1.Pod) error                { return nil }
func (nopProvider) DeletePod(context.Context, *corev1.Pod) error                { return nil }
func (nopProvider) GetPod(context.Context, string, string) (*corev1.Pod, error) { return nil, nil }
func (nopProvider) GetPodStatus(context.Context, string, string) (*corev1.PodStatus, error) {
	return nil, nil
}
func (nopProvider) GetPods(context.Context) ([]*corev1.Pod, error) { return nil, nil }

// controllerWithCached is a pod controller for nopProvider on client whose
// informer cache holds pod (the informer itself is not run).
func controllerWithCached(t *testing.T, client *fake.Clientset, pod *corev1.Pod) *PodController {
	t.Helper()
	podInformer := informers.NewSharedInformerFactory(client, 0).Core().V1().Pods()
	pc, err := NewPodController(PodControllerConfig{
		PodClient: client.CoreV1(), PodInformer: podInformer,
		EventRecorder: record.NewFakeRecorder(10), Provider: nopProvider{},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := podInformer.Informer().GetIndexer().Add(pod); err != nil {
		t.Fatal(err)
	}
	return pc
}

// TestWrittenStatusDroppedWhenInformerIsAhead: when the informer delivered
// our status write before the PATCH response was recorded, the record must
// not keep a copy of the status (no later event would drop it: at 10,000
// steady pods that was 8 MB).
func TestWrittenStatusDroppedWhenInformerIsAhead(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1", ResourceVersion: "7"},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	client := fake.NewClientset(pod)
	// The fake client does not bump resource versions: the cache already
	// holding "7" is the informer having seen the write.
	pc := controllerWithCached(t, client, pod)
	rec := pc.pods.get("ns/p")
	if err := pc.writeStatus(context.Background(), pod, rec, nil, corev1.PodStatus{Phase: corev1.PodRunning}); err != nil {
		t.Fatal(err)
	}
	if rec.view().patched != nil {
		t.Errorf("record keeps the written status (resource version %s) though the informer has it", rec.view().patched.resourceVersion)
	}
	got, err := client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil || got.Status.Phase != corev1.PodRunning {
		t.Fatalf("status not written: %v %v", got.Status.Phase, err)
	}
}

// failingDelete fails every DeletePod with a transient error.
type failingDelete struct{ nopProvider }

func (failingDelete) DeletePod(context.Context, *corev1.Pod) error {
	return errors.New("backend down")
}

// TestGiveUpLeavesNoRecord: when a caller's retry policy gives up on a pod
// whose object is gone (here DeletePod keeps failing), nothing of the pod,
// least of all its last object, stays in the controller.
func TestGiveUpLeavesNoRecord(t *testing.T) {
	client := fake.NewClientset()
	podInformer := informers.NewSharedInformerFactory(client, 0).Core().V1().Pods()
	pc, err := NewPodController(PodControllerConfig{
		PodClient: client.CoreV1(), PodInformer: podInformer,
		EventRecorder: record.NewFakeRecorder(10), Provider: failingDelete{},
		SyncPodsFromKubernetesShouldRetryFunc: queue.DefaultRetryFunc,
	})
	if err != nil {
		t.Fatal(err)
	}
	last := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}}
	pc.pods.get("ns/p").objectGone(last)
	ctx := context.Background()
	err = pc.syncPodFromKubernetes(ctx, "ns/p")
	if err == nil {
		t.Fatal("DeletePod failed, yet the sync succeeded")
	}
	if pc.pods.lookup("ns/p") == nil {
		t.Fatal("record dropped before giving up")
	}
	pc.gaveUp(ctx, "ns/p")
	if pc.pods.lookup("ns/p") != nil {
		t.Error("the record of a gone pod survived the give-up")
	}
}

// recordingProvider keeps the pods it is given.
type recordingProvider struct {
	nopProvider
	created []*corev1.Pod
}

func (p *recordingProvider) CreatePod(_ context.Context, pod *corev1.Pod) error {
	p.created = append(p.created, pod)
	return nil
}

// TestSkipDownwardAPIResolution: the provider gets the pod's environment as
// written, references unresolved (a missing ConfigMap does not hold the
// pod back), and a copy, not the informer's object.
func TestSkipDownwardAPIResolution(t *testing.T) {
	env := []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "missing"}, Key: "k"},
	}}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Env: env}}},
	}
	got := createdFrom(t, pod, nil, func(cfg *PodControllerConfig) { cfg.SkipDownwardAPIResolution = true })
	if got == pod {
		t.Error("the provider got the informer's object")
	}
	if e := got.Spec.Containers[0].Env; len(e) != 1 || e[0].ValueFrom == nil || e[0].ValueFrom.ConfigMapKeyRef == nil {
		t.Errorf("env was resolved: %+v", e)
	}
}

// TestKeepEnvObjectRefs: the provider gets ConfigMap references as written
// (the ConfigMap exists: it is read, not inlined) and downward API fields
// resolved.
func TestKeepEnvObjectRefs(t *testing.T) {
	ref := &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "k"}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{
			{Name: "A", ValueFrom: ref},
			{Name: "NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		}}}},
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"k": "value"}}
	got := createdFrom(t, pod, cm, func(cfg *PodControllerConfig) { cfg.KeepEnvObjectRefs = true })
	want := []corev1.EnvVar{{Name: "A", ValueFrom: ref}, {Name: "NAME", Value: "p"}}
	if e := got.Spec.Containers[0].Env; !apiequality.Semantic.DeepEqual(e, want) {
		t.Errorf("env = %+v, want %+v", e, want)
	}
}

// createdFrom syncs pod (and the ConfigMap cm, if any) through a pod
// controller configured by configure and returns what its provider's
// CreatePod got.
func createdFrom(t *testing.T, pod *corev1.Pod, cm *corev1.ConfigMap, configure func(*PodControllerConfig)) *corev1.Pod {
	t.Helper()
	client := fake.NewClientset(pod)
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer, cmInformer := factory.Core().V1().Pods(), factory.Core().V1().ConfigMaps()
	p := &recordingProvider{}
	cfg := PodControllerConfig{
		PodClient: client.CoreV1(), PodInformer: podInformer, ConfigMapInformer: cmInformer,
		EventRecorder: record.NewFakeRecorder(10), Provider: p,
	}
	configure(&cfg)
	pc, err := NewPodController(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := podInformer.Informer().GetIndexer().Add(pod); err != nil {
		t.Fatal(err)
	}
	if cm != nil {
		if err := cmInformer.Informer().GetIndexer().Add(cm); err != nil {
			t.Fatal(err)
		}
	}
	if err := pc.syncPodFromKubernetes(context.Background(), "ns/p"); err != nil {
		t.Fatal(err)
	}
	if len(p.created) != 1 {
		t.Fatalf("CreatePod called %d times, want 1", len(p.created))
	}
	return p.created[0]
}

// TestTerminalStatusThenRemovalInOneSync: a deleting pod whose provider
// reported it stopped gets its terminal status and is removed in the same
// status sync, as a kubelet's status manager does; a removal that fails
// fails the sync, which the status queue retries.
func TestTerminalStatusThenRemovalInOneSync(t *testing.T) {
	for _, tc := range []struct {
		name      string
		deleteErr error
	}{
		{"removed", nil},
		{"removal fails", errors.New("API server busy")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := metav1.Now()
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1", DeletionTimestamp: &now, DeletionGracePeriodSeconds: new(int64)},
				Status:     corev1.PodStatus{Phase: corev1.PodRunning},
			}
			client := fake.NewClientset(pod)
			if tc.deleteErr != nil {
				client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.deleteErr
				})
			}
			pc := controllerWithCached(t, client, pod)
			stopped := pod.DeepCopy()
			stopped.Status.Phase = corev1.PodSucceeded
			pc.pods.get("ns/p").providerReported(stopped)

			err := pc.syncPodStatusFromProvider(context.Background(), "ns/p")
			if (err != nil) != (tc.deleteErr != nil) {
				t.Fatalf("sync: %v, want an error: %v", err, tc.deleteErr != nil)
			}
			var patched, deleted bool
			for _, a := range client.Actions() {
				patched = patched || (a.GetVerb() == "patch" && a.GetSubresource() == "status")
				deleted = deleted || (a.GetVerb() == "delete" && patched)
			}
			if !patched || !deleted {
				t.Fatalf("status patched %v, then object deleted %v; want both, in that order", patched, deleted)
			}
		})
	}
}
