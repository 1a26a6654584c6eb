//go:build e2e

package stages_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/freeport"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

// These tests run the mock with the stage sets it ships
// (providers/mock/stages, kwok's Stage format) and check, through the API
// server, that unannotated workloads go through the phases the stages
// describe, and the node through its heartbeat, NotReady and deletion.

// stageFlags are --stage-config flags for the shipped sets named.
func stageFlags(t *testing.T, files ...string) []string {
	t.Helper()
	var out []string
	for _, f := range files {
		path, err := filepath.Abs(filepath.Join("..", "..", "..", "providers", "mock", "stages", f))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, "--stage-config", path)
	}
	return out
}

// seen is one status of a pod as the API server showed it, and when.
type seen struct {
	at      time.Time
	summary string
}

// history keeps every distinct status each pod of a namespace showed.
type history struct {
	mu    sync.Mutex
	added map[string]time.Time
	pods  map[string][]seen
}

// summary is a pod's status in a line: phase, whether it has an IP, its
// Initialized and Ready conditions and its containers' states.
func summary(p *corev1.Pod) string {
	cond := func(typ corev1.PodConditionType) string {
		for _, c := range p.Status.Conditions {
			if c.Type == typ {
				return string(c.Status)
			}
		}
		return "-"
	}
	out := fmt.Sprintf("%s ip=%t init=%s ready=%s", p.Status.Phase, p.Status.PodIP != "", cond(corev1.PodInitialized), cond(corev1.PodReady))
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, c := range list {
			switch s := c.State; {
			case s.Running != nil:
				out += " " + c.Name + "=running"
			case s.Terminated != nil:
				out += fmt.Sprintf(" %s=exited(%d,%s)", c.Name, s.Terminated.ExitCode, s.Terminated.Reason)
			case s.Waiting != nil:
				out += " " + c.Name + "=waiting(" + s.Waiting.Reason + ")"
			}
		}
	}
	return out
}

func watchPods(t *testing.T, client kubernetes.Interface, ns string) *history {
	t.Helper()
	h := &history{added: map[string]time.Time{}, pods: map[string][]seen{}}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	record := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.added[p.Name]; !ok {
			h.added[p.Name] = time.Now()
		}
		s := summary(p)
		if list := h.pods[p.Name]; len(list) == 0 || list[len(list)-1].summary != s {
			h.pods[p.Name] = append(list, seen{time.Now(), s})
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, o any) { record(o) }}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	cache.WaitForCacheSync(stop, inf.HasSynced)
	return h
}

// passedThrough checks that pod showed, in this order, statuses containing
// each of the parts of want (a status may match several in a row), and
// returns when it first showed each.
func (h *history) passedThrough(t *testing.T, pod string, want ...[]string) []time.Time {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	var at []time.Time
	list := h.pods[pod]
	i := 0
	for _, parts := range want {
		for ; i < len(list); i++ {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(list[i].summary, p)
			}
			if ok {
				break
			}
		}
		if i == len(list) {
			var all []string
			for _, s := range list {
				all = append(all, s.summary)
			}
			t.Errorf("pod %s never showed %q after the earlier stages; it showed:\n  %s", pod, parts, strings.Join(all, "\n  "))
			return nil
		}
		at = append(at, list[i].at)
	}
	return at
}

// eventually polls cond for up to the daemon tests' timeout.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	daemontest.Eventually(t, what, cond)
}

// events waits for an Event of reason on the object named in ns ("" for
// all namespaces) and returns it.
func events(t *testing.T, client kubernetes.Interface, ns, name, reason string) corev1.Event {
	t.Helper()
	var got corev1.Event
	eventually(t, fmt.Sprintf("Event %s on %s", reason, name), func() (bool, string) {
		list, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
		if err != nil || len(list.Items) == 0 {
			return false, fmt.Sprint(err)
		}
		got = list.Items[0]
		return true, ""
	})
	return got
}

// waitAvailable waits until the Deployment has n available replicas.
func waitAvailable(t *testing.T, client kubernetes.Interface, ns, name string, n int32) {
	t.Helper()
	eventually(t, "Deployment "+name+" available", func() (bool, string) {
		got, err := client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.AvailableReplicas == n, fmt.Sprintf("%d available", got.Status.AvailableReplicas)
	})
}

// waitJobDone waits until the Job has one pod Succeeded.
func waitJobDone(t *testing.T, client kubernetes.Interface, ns, name string) {
	t.Helper()
	eventually(t, "Job "+name+" complete", func() (bool, string) {
		got, err := client.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.Succeeded == 1, fmt.Sprintf("succeeded %d, failed %d", got.Status.Succeeded, got.Status.Failed)
	})
}

func podsOf(t *testing.T, client kubernetes.Interface, ns, selector string) []corev1.Pod {
	t.Helper()
	list, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// TestGeneralAndChaosStages runs a Deployment of unannotated pods, a Job,
// and pods whose annotations set their delays and weights or that are
// labelled for chaos, under the shipped general and chaos sets; and the
// node under the heartbeat and chaos sets.
func TestGeneralAndChaosStages(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	d := daemontest.Start(t, c, nil, stageFlags(t, "pod-general.yaml", "pod-chaos.yaml", "node-heartbeat.yaml", "node-chaos.yaml")...)
	node := daemontest.WaitNodeReady(t, c.Client, d.Name)
	h := watchPods(t, c.Client, ns)

	// The node: Running, and the heartbeat stage refreshes its Ready
	// condition every 2s to 3s (the daemon's own status writes are 5
	// minutes apart).
	var beats []time.Time
	eventually(t, "three heartbeats from the stage", func() (bool, string) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue && n.Status.Phase == corev1.NodeRunning &&
				(len(beats) == 0 || cond.LastHeartbeatTime.After(beats[len(beats)-1])) {
				beats = append(beats, cond.LastHeartbeatTime.Time)
			}
		}
		time.Sleep(500 * time.Millisecond)
		return len(beats) >= 3, fmt.Sprintf("phase %q, heartbeats %v", n.Status.Phase, beats)
	})

	// A Deployment of pods with no annotation at all: each stage waits
	// 1s to 5s.
	dep := daemontest.DeploymentOn(d.Name, "web", 3, nil, corev1.Container{Name: "app", Image: "nginx"})
	dep.Spec.Template.Labels["stages.vkubelet.io/guard"] = "true"
	dep.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox"}}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Pods whose annotations set their stages' delays and weights.
	quick := map[string]string{}
	for _, s := range []string{"pod-create", "pod-init-container-running", "pod-init-container-completed", "pod-ready", "pod-complete"} {
		quick[s+".stage.kwok.x-k8s.io/delay"] = "100ms"
		quick[s+".stage.kwok.x-k8s.io/jitter-delay"] = "200ms"
	}
	with := func(base map[string]string, more ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(more); i += 2 {
			out[more[i]] = more[i+1]
		}
		return out
	}
	slow := daemontest.MockPod("slow", d.Name, corev1.RestartPolicyAlways, with(quick,
		"pod-create.stage.kwok.x-k8s.io/delay", "3s", "pod-create.stage.kwok.x-k8s.io/jitter-delay", "3500ms"))
	doomed := daemontest.MockPod("doomed", d.Name, corev1.RestartPolicyNever, with(quick,
		"pod-start-failed.stage.kwok.x-k8s.io/enabled", "true",
		"pod-start-failed.stage.kwok.x-k8s.io/weight", "1", "pod-ready.stage.kwok.x-k8s.io/weight", "0"))
	crashy := daemontest.MockPod("crashy", d.Name, corev1.RestartPolicyAlways, with(quick,
		"pod-container-running-failed.stage.kwok.x-k8s.io/delay", "300ms",
		"pod-container-running-failed.stage.kwok.x-k8s.io/exit-code", "3",
		"pod-container-running-failed.stage.kwok.x-k8s.io/reason", "Crashed"))
	crashy.Labels = map[string]string{"pod-container-running-failed.stage.kwok.x-k8s.io": "true"}
	daemontest.CreatePods(t, c.Client, ns, slow, doomed, crashy)

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "batch"},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: quick},
				Spec: corev1.PodSpec{
					NodeName: d.Name, RestartPolicy: corev1.RestartPolicyNever, Tolerations: daemontest.Tolerate,
					Containers: []corev1.Container{{Name: "work", Image: "busybox"}},
				},
			},
		},
	}
	if _, err := c.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	waitAvailable(t, c.Client, ns, "web", 3)
	web := podsOf(t, c.Client, ns, "app=web")
	for _, p := range web {
		h.passedThrough(t, p.Name,
			[]string{"Pending ip=true init=False ready=False setup=waiting(PodInitializing) app=waiting(PodInitializing)"},
			[]string{"Pending", "setup=running"},
			[]string{"Pending", "init=True", "setup=exited(0,Completed) app=waiting(ContainerCreating)"},
			[]string{"Running ip=true init=True ready=True setup=exited(0,Completed) app=running"})
		if !slices.Contains(p.Finalizers, "stages.vkubelet.io/guard") {
			eventually(t, "the guard finalizer on "+p.Name, func() (bool, string) {
				got, err := c.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
				return err == nil && slices.Contains(got.Finalizers, "stages.vkubelet.io/guard"), fmt.Sprint(err)
			})
		}
		if e := events(t, c.Client, ns, p.Name, "Created"); e.Type != corev1.EventTypeNormal || e.Message != "Created the pod's sandbox" {
			t.Errorf("pod-create's Event: %+v", e)
		}
		events(t, c.Client, ns, p.Name, "Started")
		// Its IP is the one the mock gave it.
		if p.Status.PodIP == "" || p.Status.HostIP != "127.0.0.1" {
			t.Errorf("pod %s: IP %q, host IP %q", p.Name, p.Status.PodIP, p.Status.HostIP)
		}
	}

	daemontest.WaitPod(t, c.Client, ns, "slow", "Running", daemontest.Running)
	if at := h.passedThrough(t, "slow", []string{"Pending ip=true"}); at != nil {
		h.mu.Lock()
		waited := at[0].Sub(h.added["slow"])
		h.mu.Unlock()
		// pod-create waits 3s to 3.5s from when the daemon got the pod,
		// after the watch saw it created.
		if waited < 2900*time.Millisecond {
			t.Errorf("slow: its IP after %s, before the 3s its annotation asks", waited)
		}
	}

	failed := daemontest.WaitPod(t, c.Client, ns, "doomed", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if s := daemontest.MainContainer(failed); s.State.Terminated == nil || s.State.Terminated.Reason != "StartError" || s.State.Terminated.ExitCode != 128 {
		t.Errorf("doomed: pod-start-failed, weighted over pod-ready, did not end it: %+v", s.State)
	}
	h.passedThrough(t, "doomed", []string{"Pending ip=true init=True"}, []string{"Failed", "main=exited(128,StartError)"})
	if e := events(t, c.Client, ns, "doomed", "Failed"); e.Type != corev1.EventTypeWarning {
		t.Errorf("pod-start-failed's Event: %+v", e)
	}

	crashed := daemontest.WaitPod(t, c.Client, ns, "crashy", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if s := daemontest.MainContainer(crashed); s.State.Terminated == nil || s.State.Terminated.ExitCode != 3 || s.State.Terminated.Reason != "Crashed" {
		t.Errorf("crashy: %+v", s.State)
	}
	h.passedThrough(t, "crashy", []string{"Running ip=true init=True ready=True main=running"}, []string{"Failed", "main=exited(3,Crashed)"})
	events(t, c.Client, ns, "crashy", "BackOff")

	waitJobDone(t, c.Client, ns, "batch")
	for _, p := range podsOf(t, c.Client, ns, "batch.kubernetes.io/job-name=batch") {
		h.passedThrough(t, p.Name, []string{"Pending ip=true"}, []string{"Running ip=true init=True ready=True work=running"}, []string{"Succeeded", "work=exited(0,Completed)"})
	}

	// Scaled to nothing, each pod releases its guard (pod-release) and
	// goes (pod-delete).
	if _, err := c.Client.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range web {
		daemontest.WaitGone(t, c.Client, ns, p.Name, p.UID)
		events(t, c.Client, ns, p.Name, "Released")
	}

	// The node: labelled for it, NotReady with the reason its annotation
	// gives; then, labelled for that, deleted.
	patch := `{"metadata":{"labels":{"node-not-ready.stage.kwok.x-k8s.io":"true"},"annotations":{"node-not-ready.stage.kwok.x-k8s.io/reason":"DiskOnFire","node-not-ready.stage.kwok.x-k8s.io/type":"DiskPressure"}}}`
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, d.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the node NotReady", func() (bool, string) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var ready, disk bool
		for _, cond := range n.Status.Conditions {
			ready = ready || cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionFalse && cond.Reason == "DiskOnFire"
			disk = disk || cond.Type == corev1.NodeDiskPressure && cond.Status == corev1.ConditionTrue
		}
		return ready && disk, fmt.Sprintf("%+v", n.Status.Conditions)
	})
	if e := events(t, c.Client, "", d.Name, "NodeNotReady"); e.Type != corev1.EventTypeWarning || e.InvolvedObject.Kind != "Node" {
		t.Errorf("node-not-ready's Event: %+v", e)
	}

	w, err := c.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + d.Name, ResourceVersion: node.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, d.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"node-delete.stage.kwok.x-k8s.io":"true"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(daemontest.Timeout)
	for deleted := false; !deleted; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the node watch ended")
			}
			deleted = ev.Type == watch.Deleted
		case <-deadline:
			t.Fatal("node-delete did not delete the node")
		}
	}
	events(t, c.Client, "", d.Name, "NodeDeleted")
	daemontest.CheckNoPanic(t, d)
}

// TestFastStages runs a Deployment and a Job under the shipped fast set:
// Running at once, the Job's pod Succeeded, deleted pods gone.
func TestFastStages(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	d := daemontest.Start(t, c, nil, stageFlags(t, "pod-fast.yaml")...)
	daemontest.WaitNodeReady(t, c.Client, d.Name)
	h := watchPods(t, c.Client, ns)
	dep := daemontest.DeploymentOn(d.Name, "fast", 2, nil, corev1.Container{Name: "app", Image: "nginx"})
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAvailable(t, c.Client, ns, "fast", 2)
	pods := podsOf(t, c.Client, ns, "app=fast")
	for _, p := range pods {
		h.passedThrough(t, p.Name, []string{"Pending ip=false"}, []string{"Running ip=true init=True ready=True app=running"})
		if len(p.Status.PodIPs) == 0 || p.Status.PodIPs[0].IP != p.Status.PodIP || len(p.Status.HostIPs) != 1 {
			t.Errorf("pod %s: IPs %+v, host IPs %+v", p.Name, p.Status.PodIPs, p.Status.HostIPs)
		}
	}
	if err := c.Client.AppsV1().Deployments(ns).Delete(ctx, "fast", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		daemontest.WaitGone(t, c.Client, ns, p.Name, p.UID)
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "once"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeName: d.Name, RestartPolicy: corev1.RestartPolicyNever, Tolerations: daemontest.Tolerate,
			Containers: []corev1.Container{{Name: "work", Image: "busybox"}},
		}}},
	}
	if _, err := c.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitJobDone(t, c.Client, ns, "once")
	daemontest.CheckNoPanic(t, d)
}

// TestBadStageFile: a stage file in error stops the daemon at start with
// one line naming the file, the stage and the field; so does a malformed
// expression, named.
func TestBadStageFile(t *testing.T) {
	c := testcluster.Shared(t)
	dir := t.TempDir()
	for _, tc := range []struct{ doc, want string }{
		{"apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: pod-odd}\nspec:\n  resourceRef: {kind: Pod}\n  selector: {matchLabel: {a: b}}\n",
			`(stage "pod-odd"): unknown field "spec.selector.matchLabel"`},
		{"apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: pod-typo}\nspec:\n  resourceRef: {kind: Pod}\n  selector:\n    matchExpressions: [{key: '.status.conditions.[', operator: Exists}]\n",
			`(stage "pod-typo"): spec.selector.matchExpressions[0]: expression ".status.conditions.["`},
	} {
		path := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(path, []byte(tc.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out := daemontest.Run(t, "--provider", "mock", "--nodename", testcluster.UniqueName("vk"), "--kubeconfig", c.Info.Kubeconfig,
			"--metrics-addr", "", "--listen-address", "127.0.0.1", "--listen-port", strconv.Itoa(freeport.Get(t)), "--stage-config", path)
		var line string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, path) {
				line = l
			}
		}
		if code == 0 || !strings.Contains(line, "stage file "+path+": document 1 "+tc.want) {
			t.Errorf("exit %d, output:\n%s\nwant a line naming %s and %s", code, out, path, tc.want)
		}
	}
}
