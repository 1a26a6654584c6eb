package mock

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vkubelet/virtual-kubelet/provider"
)

// quick are the annotations that make every stage of the general set
// wait 10ms to 20ms.
func quick() map[string]string {
	ann := map[string]string{}
	for _, s := range []string{"pod-create", "pod-init-container-running", "pod-init-container-completed", "pod-ready", "pod-complete", "pod-delete"} {
		ann[s+".stage.kwok.x-k8s.io/delay"] = "10ms"
		ann[s+".stage.kwok.x-k8s.io/jitter-delay"] = "20ms"
	}
	return ann
}

func newStagedProvider(t *testing.T, kube *fake.Clientset, files ...string) (*Provider, *recorder) {
	t.Helper()
	var paths []string
	for _, f := range files {
		paths = append(paths, filepath.Join("stages", f))
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p, err := New(ctx, provider.InitConfig{NodeName: "vk0", InternalIP: "10.213.0.2", DaemonPort: 10250, StageConfigs: paths, KubeClient: kube})
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	p.(*Provider).NotifyPods(ctx, r.record)
	return p.(*Provider), r
}

func readyOf(p *corev1.Pod) bool {
	return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].Ready
}

// TestStagesRunAnUnannotatedPod: the general set takes a pod through
// Pending with its IP, Running and Ready, holds its finalizer while it
// runs and releases it on deletion, then ends it; the mock's own view
// (exec, logs) follows.
func TestStagesRunAnUnannotatedPod(t *testing.T) {
	pod := testPod("web", quick(), corev1.RestartPolicyAlways)
	pod.Labels = map[string]string{"stages.vkubelet.io/guard": "true"}
	pod.Status.PodIPs = []corev1.PodIP{{IP: "10.244.3.3"}}
	kube := fake.NewClientset(pod.DeepCopy())
	p, r := newStagedProvider(t, kube, "pod-general.yaml")
	ctx := context.Background()
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if got := r.last(); got.Status.Phase != corev1.PodPending || got.Status.PodIP != "" {
		t.Fatalf("before pod-create: %+v", got.Status)
	}
	created := r.waitFor(t, "pod-create", func(p *corev1.Pod) bool { return p.Status.PodIP != "" })
	if created.Status.Phase != corev1.PodPending || created.Status.PodIP != "10.244.3.3" || created.Status.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" {
		t.Fatalf("pod-create: %+v", created.Status)
	}
	running := r.waitFor(t, "pod-ready", readyOf)
	if running.Status.Phase != corev1.PodRunning || running.Status.ContainerStatuses[0].ContainerID == "" {
		t.Fatalf("pod-ready: %+v", running.Status)
	}
	// The mock's containers follow: exec runs in the running one.
	p.mu.Lock()
	c := p.pods["ns/web"].containers[0]
	isRunning := c.status.State.Running != nil && len(c.instances) == 1
	p.mu.Unlock()
	if !isRunning {
		t.Error("the mock's container does not run with the stage's status")
	}
	// pod-guard adds the finalizer through the API server.
	waitAPI(t, kube, "the guard finalizer", func(p *corev1.Pod) bool {
		return slices.Contains(p.Finalizers, "stages.vkubelet.io/guard")
	})

	deleting := pod.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now().Add(200 * time.Millisecond)}
	deleting.Finalizers = []string{"stages.vkubelet.io/guard"}
	if err := p.DeletePod(ctx, deleting); err != nil {
		t.Fatal(err)
	}
	waitAPI(t, kube, "the guard released", func(p *corev1.Pod) bool { return len(p.Finalizers) == 0 })
	done := r.waitFor(t, "the terminal status", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if done.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Errorf("terminal status: %+v", done.Status)
	}
	if _, err := p.GetPod(ctx, "ns", "web"); err == nil {
		t.Error("the deleted pod is still in the mock")
	}
}

func waitAPI(t *testing.T, kube *fake.Clientset, what string, cond func(*corev1.Pod) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		got, err := kube.CoreV1().Pods("ns").Get(context.Background(), "web", metav1.GetOptions{})
		if err == nil && cond(got) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s: not within 5s", what)
}

// TestAnnotationsWinOverStages: a pod with a mock.vkubelet.io annotation
// runs as its annotations say, stages or not.
func TestAnnotationsWinOverStages(t *testing.T) {
	p, r := newStagedProvider(t, fake.NewClientset(), "pod-general.yaml")
	ann := quick()
	ann[AnnotationRunFor] = "50ms"
	if err := p.CreatePod(context.Background(), testPod("scripted", ann, corev1.RestartPolicyNever)); err != nil {
		t.Fatal(err)
	}
	if got := r.last(); got.Status.Phase != corev1.PodRunning {
		t.Fatalf("an annotated pod waits for stages: %+v", got.Status)
	}
	r.waitFor(t, "Succeeded after run-for", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
}

// TestDeletedPodWithoutStageStops: a deleted pod that no stage takes stops
// at once, as an unstaged one does.
func TestDeletedPodWithoutStageStops(t *testing.T) {
	p, r := newStagedProvider(t, fake.NewClientset(), "pod-fast.yaml")
	pod := testPod("web", nil, corev1.RestartPolicyAlways)
	ctx := context.Background()
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "pod-run", readyOf)
	// pod-gone takes a pod with a deletionTimestamp; without one the pod
	// is being removed from the API server already, and stops at once.
	pod.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if err := p.DeletePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "terminal", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
}

// TestBadStageFileStopsTheProvider: a stage file in error is New's error,
// one line naming the file, the stage and the field.
func TestBadStageFileStopsTheProvider(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	doc := "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: pod-odd}\nspec:\n  resourceRef: {kind: Pod}\n  selector: {matchExpression: []}\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(context.Background(), provider.InitConfig{NodeName: "vk0", StageConfigs: []string{path}})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `stage "pod-odd"`) ||
		!strings.Contains(err.Error(), `unknown field "spec.selector.matchExpression"`) || strings.Contains(err.Error(), "\n") {
		t.Errorf("New = %v", err)
	}
}
