package stage

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// shipped is the directory of the stage sets the mock ships.
const shipped = "../../stages"

var testEnv = Env{
	NodeName: "vk0", NodeIP: "10.1.0.2", NodePort: 10250, Version: "v9.9.9",
	StartTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	PodIPs: func(namespace, name string) []string {
		if namespace == "ns" && name == "web" {
			return []string{"10.244.0.7", "fd00::7"}
		}
		return nil
	},
}

func load(t *testing.T, files ...string) *Set {
	t.Helper()
	var paths []string
	for _, f := range files {
		paths = append(paths, filepath.Join(shipped, f))
	}
	set, err := Load(paths, testEnv)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// objectOf is obj as stages see it.
func objectOf(t *testing.T, obj any) *Object {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	o := &Object{JSON: m}
	if meta, ok := obj.(metav1.Object); ok {
		o.Labels, o.Annotations = meta.GetLabels(), meta.GetAnnotations()
	}
	return o
}

func webPod(annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1", Annotations: annotations},
		Spec: corev1.PodSpec{
			NodeName:       "vk0",
			InitContainers: []corev1.Container{{Name: "setup", Image: "busybox"}},
			Containers:     []corev1.Container{{Name: "app", Image: "nginx"}, {Name: "side", Image: "envoy"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

// advance matches pod against l, applies the chosen stage's status patches
// and returns the stage and the pod with its new status.
func advance(t *testing.T, l Lifecycle, pod *corev1.Pod) (*Stage, *corev1.Pod) {
	t.Helper()
	s, err := l.Match(objectOf(t, pod), rand.New(rand.NewPCG(1, 2)))
	if err != nil || s == nil {
		t.Fatalf("Match = %v, %v for status %+v", s, err, pod.Status)
	}
	next := pod.DeepCopy()
	next.Status = corev1.PodStatus{}
	applyPatches(t, s, KindPod, pod, &next.Status)
	return s, next
}

// applyPatches applies s's status patches to obj (a Pod or Node), one
// after the other, into status.
func applyPatches(t *testing.T, s *Stage, kind string, obj, status any) {
	t.Helper()
	o := objectOf(t, obj)
	for _, st := range s.Steps() {
		if st.Patch == nil {
			continue
		}
		got, err := st.Patch.Apply(o, kind)
		if err != nil {
			t.Fatalf("stage %s: %v", s.Name(), err)
		}
		data, _ := json.Marshal(got)
		if err := json.Unmarshal(data, status); err != nil {
			t.Fatalf("stage %s: status %s: %v", s.Name(), data, err)
		}
		o.JSON["status"] = jsonOf(t, got)
	}
}

func jsonOf(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func podCondition(p *corev1.Pod, typ corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// TestGeneralSetRunsAPodThroughItsPhases follows a pod with an init
// container through the shipped general set: each status is the one the
// stage describes, with the IPs the node gave the pod.
func TestGeneralSetRunsAPodThroughItsPhases(t *testing.T) {
	pods := load(t, "pod-general.yaml", "pod-chaos.yaml").Pods()
	pod := webPod(nil)

	s, pod := advance(t, pods, pod)
	if s.Name() != "pod-create" || pod.Status.Phase != corev1.PodPending || pod.Status.PodIP != "10.244.0.7" || pod.Status.HostIP != "10.1.0.2" {
		t.Fatalf("%s: %+v", s.Name(), pod.Status)
	}
	if len(s.Steps()) != 2 || s.Steps()[0].Event == nil || s.Steps()[0].Event.Reason != "Created" {
		t.Errorf("pod-create's steps: %+v", s.Steps())
	}
	if w := pod.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "PodInitializing" || podCondition(pod, corev1.PodInitialized) != corev1.ConditionFalse {
		t.Fatalf("pod-create with an init container: %+v", pod.Status)
	}
	if msg := pod.Status.Conditions[0].Message; msg != "containers with incomplete status: [setup]" {
		t.Errorf("Initialized message %q", msg)
	}
	s, pod = advance(t, pods, pod)
	if s.Name() != "pod-init-container-running" || pod.Status.InitContainerStatuses[0].State.Running == nil || pod.Status.PodIP != "10.244.0.7" {
		t.Fatalf("%s: %+v", s.Name(), pod.Status)
	}
	s, pod = advance(t, pods, pod)
	if s.Name() != "pod-init-container-completed" || pod.Status.InitContainerStatuses[0].State.Terminated == nil || podCondition(pod, corev1.PodInitialized) != corev1.ConditionTrue {
		t.Fatalf("%s: %+v", s.Name(), pod.Status)
	}
	s, pod = advance(t, pods, pod)
	if s.Name() != "pod-ready" || pod.Status.Phase != corev1.PodRunning || podCondition(pod, corev1.PodReady) != corev1.ConditionTrue ||
		len(pod.Status.ContainerStatuses) != 2 || pod.Status.ContainerStatuses[1].State.Running == nil {
		t.Fatalf("%s: %+v", s.Name(), pod.Status)
	}
	// The strategic merge keeps the conditions the stage leaves out.
	if podCondition(pod, corev1.PodInitialized) != corev1.ConditionTrue {
		t.Errorf("pod-ready lost Initialized: %+v", pod.Status.Conditions)
	}
	if got, err := pods.Match(objectOf(t, pod), rand.New(rand.NewPCG(1, 2))); err != nil || got != nil {
		t.Errorf("a Running pod of no Job matched %v, %v", got, err)
	}
	pod.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "j", APIVersion: "batch/v1", UID: "j1"}}
	s, pod = advance(t, pods, pod)
	if s.Name() != "pod-complete" || pod.Status.Phase != corev1.PodSucceeded || pod.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("%s: %+v", s.Name(), pod.Status)
	}
}

// TestFinalizersAndDelete: a guarded pod gets its finalizer while it runs,
// loses it when deleted, and only then is deleted.
func TestFinalizersAndDelete(t *testing.T) {
	pods := load(t, "pod-general.yaml").Pods()
	pod := webPod(nil)
	pod.Labels = map[string]string{"stages.vkubelet.io/guard": "true"}
	pod.Status.Phase, pod.Status.PodIP = corev1.PodRunning, "10.244.0.7"
	pod.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", APIVersion: "apps/v1", UID: "r1"}}
	rnd := rand.New(rand.NewPCG(1, 2))
	s, err := pods.Match(objectOf(t, pod), rnd)
	if err != nil || s == nil || s.Name() != "pod-guard" {
		t.Fatalf("Match = %v, %v", s, err)
	}
	patch, err := s.Steps()[0].Finalizers.JSONPatch(nil)
	if want := `[{"op":"add","path":"/metadata/finalizers","value":["stages.vkubelet.io/guard"]}]`; err != nil || string(patch) != want {
		t.Errorf("add to none: %s, %v", patch, err)
	}
	patch, _ = s.Steps()[0].Finalizers.JSONPatch([]string{"other"})
	if want := `[{"op":"add","path":"/metadata/finalizers/-","value":"stages.vkubelet.io/guard"}]`; string(patch) != want {
		t.Errorf("add to some: %s", patch)
	}

	pod.Finalizers = []string{"other", "stages.vkubelet.io/guard"}
	if s, _ := pods.Match(objectOf(t, pod), rnd); s != nil {
		t.Errorf("a guarded Running pod matched %s", s.Name())
	}
	deleted := metav1.NewTime(time.Now().Add(30 * time.Second))
	pod.DeletionTimestamp = &deleted
	s, _ = pods.Match(objectOf(t, pod), rnd)
	if s == nil || s.Name() != "pod-release" {
		t.Fatalf("a deleted guarded pod matched %v", s)
	}
	patch, _ = s.Steps()[1].Finalizers.JSONPatch(pod.Finalizers)
	if want := `[{"op":"remove","path":"/metadata/finalizers/1"}]`; string(patch) != want {
		t.Errorf("remove: %s", patch)
	}
	pod.Finalizers = nil
	s, _ = pods.Match(objectOf(t, pod), rnd)
	if s == nil || s.Name() != "pod-delete" || !s.Steps()[0].Delete {
		t.Fatalf("a deleted pod matched %v", s)
	}
	// The delay ends by the deletion's deadline.
	for range 50 {
		d, err := s.Delay(objectOf(t, pod), time.Now(), rnd)
		if err != nil || d < time.Second || d > 30*time.Second {
			t.Fatalf("pod-delete's delay %s, %v", d, err)
		}
	}
	empty := &FinalizerChange{empty: true}
	patch, _ = empty.JSONPatch([]string{"a", "b"})
	if want := `[{"op":"remove","path":"/metadata/finalizers"}]`; string(patch) != want {
		t.Errorf("empty: %s", patch)
	}
	if patch, _ = empty.JSONPatch(nil); patch != nil {
		t.Errorf("empty of none: %s", patch)
	}
}

// TestDelaysFromAnnotations: the pod's annotations set the delay and its
// jitter; without them the stage's own apply.
func TestDelaysFromAnnotations(t *testing.T) {
	s := stageNamed(t, load(t, "pod-general.yaml").Pods(), "pod-create")
	rnd := rand.New(rand.NewPCG(3, 4))
	now := time.Now()
	for _, tc := range []struct {
		ann      map[string]string
		min, max time.Duration
	}{
		{nil, time.Second, 5 * time.Second},
		{map[string]string{"pod-create.stage.kwok.x-k8s.io/delay": "3s"}, 3 * time.Second, 5 * time.Second},
		{map[string]string{"pod-create.stage.kwok.x-k8s.io/delay": "3s", "pod-create.stage.kwok.x-k8s.io/jitter-delay": "3100ms"}, 3 * time.Second, 3100 * time.Millisecond},
		// A jitter shorter than the duration is the delay.
		{map[string]string{"pod-create.stage.kwok.x-k8s.io/jitter-delay": "200ms"}, 200 * time.Millisecond, 200 * time.Millisecond},
		// A time is waited for.
		{map[string]string{"pod-create.stage.kwok.x-k8s.io/delay": now.Add(7 * time.Second).Format(time.RFC3339Nano), "pod-create.stage.kwok.x-k8s.io/jitter-delay": "7s"}, 7 * time.Second, 7 * time.Second},
		// What is not a duration is ignored.
		{map[string]string{"pod-create.stage.kwok.x-k8s.io/delay": "soon"}, time.Second, 5 * time.Second},
	} {
		obj := objectOf(t, webPod(tc.ann))
		lo, hi := time.Hour, time.Duration(0)
		for range 200 {
			d, err := s.Delay(obj, now, rnd)
			if err != nil {
				t.Fatal(err)
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		if lo < tc.min || hi > tc.max || (tc.max-tc.min > time.Second && hi-lo < (tc.max-tc.min)/2) {
			t.Errorf("%v: delays from %s to %s, want within %s to %s, spread", tc.ann, lo, hi, tc.min, tc.max)
		}
	}
}

func stageNamed(t *testing.T, l Lifecycle, name string) *Stage {
	t.Helper()
	for _, s := range l {
		if s.Name() == name {
			return s
		}
	}
	t.Fatalf("no stage %s", name)
	return nil
}

// TestWeightsFromAnnotations: of two matching stages, the weights the
// pod's annotations give decide, by their proportion.
func TestWeightsFromAnnotations(t *testing.T) {
	pods := load(t, "pod-general.yaml", "pod-chaos.yaml").Pods()
	pod := webPod(nil)
	pod.Spec.InitContainers = nil
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}}
	pod.Status.PodIP = "10.244.0.7"
	count := func(ann map[string]string) map[string]int {
		pod.Annotations = ann
		rnd := rand.New(rand.NewPCG(5, 6))
		got := map[string]int{}
		for range 1000 {
			s, err := pods.Match(objectOf(t, pod), rnd)
			if err != nil || s == nil {
				t.Fatalf("Match = %v, %v", s, err)
			}
			got[s.Name()]++
		}
		return got
	}
	on := "pod-start-failed.stage.kwok.x-k8s.io/enabled"
	if got := count(nil); got["pod-ready"] != 1000 {
		t.Errorf("without the annotation: %v", got)
	}
	if got := count(map[string]string{on: "true"}); got["pod-ready"] != 1000 {
		t.Errorf("pod-start-failed of weight 0: %v", got)
	}
	if got := count(map[string]string{on: "true", "pod-start-failed.stage.kwok.x-k8s.io/weight": "1", "pod-ready.stage.kwok.x-k8s.io/weight": "0"}); got["pod-start-failed"] != 1000 {
		t.Errorf("pod-ready of weight 0: %v", got)
	}
	got := count(map[string]string{on: "true", "pod-start-failed.stage.kwok.x-k8s.io/weight": "3"})
	if got["pod-start-failed"] < 650 || got["pod-start-failed"] > 850 {
		t.Errorf("3 to 1: %v", got)
	}
}

// TestNodeStages: the heartbeat keeps the node's addresses (YAML) and
// refreshes its conditions; not-ready takes reason and message from the
// node's annotations and sets the pressure condition they name.
func TestNodeStages(t *testing.T) {
	nodes := load(t, "node-heartbeat.yaml", "node-chaos.yaml").Nodes()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "vk0", CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))},
		Status: corev1.NodeStatus{
			Phase:      corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.0.2"}},
		},
	}
	apply := func(s *Stage) *corev1.Node {
		out := node.DeepCopy()
		out.Status = corev1.NodeStatus{}
		applyPatches(t, s, KindNode, node, &out.Status)
		return out
	}
	rnd := rand.New(rand.NewPCG(7, 8))
	s, err := nodes.Match(objectOf(t, node), rnd)
	if err != nil || s == nil || s.Name() != "node-heartbeat" || !s.ImmediateNextStage() {
		t.Fatalf("Match = %v, %v", s, err)
	}
	beat := apply(s)
	if len(beat.Status.Conditions) != 5 || beat.Status.Conditions[0].LastHeartbeatTime.IsZero() ||
		!beat.Status.Conditions[0].LastTransitionTime.Equal(&node.CreationTimestamp) ||
		len(beat.Status.Addresses) != 1 || beat.Status.Addresses[0].Address != "10.1.0.2" || beat.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Errorf("heartbeat: %+v", beat.Status)
	}
	node.Labels = map[string]string{"node-not-ready.stage.kwok.x-k8s.io": "true"}
	node.Annotations = map[string]string{"node-not-ready.stage.kwok.x-k8s.io/type": "DiskPressure", "node-not-ready.stage.kwok.x-k8s.io/reason": "DiskGone"}
	s, _ = nodes.Match(objectOf(t, node), rnd)
	if s == nil || s.Name() != "node-not-ready" {
		t.Fatalf("labelled node matched %v", s)
	}
	down := apply(s)
	var ready, disk *corev1.NodeCondition
	for i, c := range down.Status.Conditions {
		switch c.Type {
		case corev1.NodeReady:
			ready = &down.Status.Conditions[i]
		case corev1.NodeDiskPressure:
			disk = &down.Status.Conditions[i]
		}
	}
	if ready == nil || ready.Status != corev1.ConditionFalse || ready.Reason != "DiskGone" || ready.Message != "node failed (vk v9.9.9)" ||
		disk == nil || disk.Status != corev1.ConditionTrue {
		t.Errorf("not ready: %+v", down.Status.Conditions)
	}
	node.Labels["node-delete.stage.kwok.x-k8s.io"] = "true"
	if s, _ = nodes.Match(objectOf(t, node), rnd); s == nil || s.Name() != "node-delete" {
		// Weighted 20000 to 10000: two in three, and with this seed the first.
		t.Logf("node-delete not chosen first: %v", s)
	}
}

// TestTemplateFunctions checks kwok's functions by what they write.
func TestTemplateFunctions(t *testing.T) {
	for _, tc := range []struct{ tmpl, want string }{
		{`a: {{ Quote "x\"y" }}`, `{"a":"x\"y"}`},
		{`a: {{ Quote 3 }}`, `{"a":"3"}`},
		{`a: {{ Quote .metadata.name }}`, `{"a":"web"}`},
		{`a: {{ StartTime }}`, `{"a":"2026-01-02T03:04:05Z"}`},
		{`a: {{ Version }}`, `{"a":"v9.9.9"}`},
		{`a: {{ NodeName }}/{{ NodeIP }}:{{ NodePort }}`, `{"a":"vk0/10.1.0.2:10250"}`},
		{`a: {{ PodIPWith "vk0" false "" "web" "ns" }}`, `{"a":"10.244.0.7"}`},
		{`a: {{ PodIPWith "vk0" true "" "web" "ns" }}`, `{"a":"10.1.0.2"}`},
		{`a: {{ PodIPsWith "vk0" false "" "web" "ns" | join "," }}`, `{"a":"10.244.0.7,fd00::7"}`},
		{`a: {{ NodeIPsWith "vk0" | first }}`, `{"a":"10.1.0.2"}`},
		{"a:\n{{ YAML .spec.containers 1 }}", `{"a":[{"image":"nginx","name":"app","resources":{}},{"image":"envoy","name":"side","resources":{}}]}`},
		{`a: {{ len NodeConditions }}`, `{"a":5}`},
		{`a: "{{ env "HOME" }}"`, ""},
	} {
		st, err := Parse("t.yaml", []byte(`{"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "s"},
			"spec": {"resourceRef": {"kind": "Pod"}, "selector": {}, "next": {"patches": [{"subresource": "status", "root": "status", "template": `+quote(tc.tmpl)+`}]}}}`), testEnv)
		if tc.want == "" {
			if err == nil || !strings.Contains(err.Error(), `function "env" not defined`) {
				t.Errorf("%s: %v, want env refused", tc.tmpl, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.tmpl, err)
		}
		obj := objectOf(t, webPod(nil))
		obj.JSON["status"] = map[string]any{}
		got, err := st[0].Steps()[0].Patch.Apply(obj, KindPod)
		if err != nil {
			t.Fatalf("%s: %v", tc.tmpl, err)
		}
		data, _ := json.Marshal(map[string]any{"a": got["a"]})
		if string(data) != tc.want {
			t.Errorf("%s: %s, want %s", tc.tmpl, data, tc.want)
		}
	}
}

// TestBadStageFiles: each mistake is one line naming the file, the stage
// and the field or expression.
func TestBadStageFiles(t *testing.T) {
	head := "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: broken\n"
	spec := func(s string) string { return head + "spec:\n  resourceRef: {kind: Pod}\n" + s }
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown field", spec("  selector:\n    matchLabelz: {a: b}\n"), `stage "broken"): unknown field "spec.selector.matchLabelz"`},
		{"unknown top field", head + "spek: {}\n", `unknown field "spek"`},
		{"bad YAML", head + "spec: [\n", "document 1"},
		{"bad expression", spec("  selector:\n    matchExpressions:\n    - {key: '.metadata.[', operator: Exists}\n"), `spec.selector.matchExpressions[0]: expression ".metadata.["`},
		{"bad operator", spec("  selector:\n    matchExpressions:\n    - {key: .a, operator: Within, values: [x]}\n"), `unknown operator "Within"`},
		{"In without values", spec("  selector:\n    matchExpressions:\n    - {key: .a, operator: In}\n"), "operator In needs values"},
		{"bad weightFrom", spec("  selector: {}\n  weightFrom: {expressionFrom: '.a |'}\n"), `spec.weightFrom: expression ".a |"`},
		{"bad durationFrom", spec("  selector: {}\n  delay: {durationFrom: {expressionFrom: ')'}}\n"), `spec.delay.durationFrom: expression ")"`},
		{"negative delay", spec("  selector: {}\n  delay: {durationMilliseconds: -1}\n"), "durationMilliseconds -1"},
		{"bad template", spec("  selector: {}\n  next: {statusTemplate: '{{ .a '}\n"), "spec.next.statusTemplate: template:"},
		{"unknown function", spec("  selector: {}\n  next: {statusTemplate: '{{ Nope }}'}\n"), `function "Nope" not defined`},
		{"cel", spec("  selector:\n    matchExpressions:\n    - cel: {expression: 'true'}\n"), "matchExpressions[0].cel: CEL selectors are not supported"},
		{"other kind", head + "spec:\n  resourceRef: {kind: PersistentVolume}\n", `spec.resourceRef.kind "PersistentVolume"`},
		{"other subresource", spec("  next: {statusTemplate: 'a: b', statusSubresource: scale}\n"), `statusSubresource "scale"`},
		{"apply", spec("  steps: [{apply: {template: 'x'}}]\n"), "spec.steps[0].apply: not supported"},
		{"no name", "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nspec: {resourceRef: {kind: Pod}}\n", "metadata.name"},
		{"not a stage", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: broken}\n", `want apiVersion kwok.x-k8s.io/v1alpha1, kind Stage`},
		{"bad event", spec("  next: {event: {type: Loud, reason: X}}\n"), `event.type "Loud"`},
		{"list item", "kind: StageList\napiVersion: kwok.x-k8s.io/v1alpha1\nitems:\n- " + strings.ReplaceAll(spec("  wat: 1\n"), "\n", "\n  "), `item 1 (stage "broken"): unknown field "spec.wat"`},
	} {
		_, err := Parse("bad.yaml", []byte(tc.doc), testEnv)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "stage file bad.yaml: document 1") || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: %q, want one line naming the file and %q", tc.name, msg, tc.want)
		}
	}
}

// TestFileShapes: a multi-document file, a YAML list and a List load
// alike; a stage without a selector matches nothing, as in kwok; two
// stages of one name are an error.
func TestFileShapes(t *testing.T) {
	one := `{"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "%s"}, "spec": {"resourceRef": {"kind": "Pod"}%s}}`
	a, b := fmt.Sprintf(one, "a", `, "selector": {}`), fmt.Sprintf(one, "b", "")
	for name, data := range map[string]string{
		"documents": "---\n" + a + "\n---\n" + b + "\n---\n",
		"sequence":  "[" + a + ", " + b + "]",
		"List":      `{"apiVersion": "v1", "kind": "List", "items": [` + a + ", " + b + "]}",
	} {
		stages, err := Parse(name, []byte(data), testEnv)
		if err != nil || len(stages) != 2 {
			t.Errorf("%s: %d stages, %v", name, len(stages), err)
		}
	}
	dir := t.TempDir()
	for _, f := range []string{"1.yaml", "2.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(a+"\n---\n"+b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	set, err := Load([]string{filepath.Join(dir, "1.yaml")}, testEnv)
	if err != nil || len(set.Pods()) != 1 {
		t.Errorf("the stage without a selector is kept: %v, %v", set, err)
	}
	if _, err := Load([]string{filepath.Join(dir, "1.yaml"), filepath.Join(dir, "2.yaml")}, testEnv); err == nil || !strings.Contains(err.Error(), `stage "a": a Pod stage of that name is in`) {
		t.Errorf("two stages of one name: %v", err)
	}
	if _, err := Load([]string{filepath.Join(dir, "none.yaml")}, testEnv); err == nil || !strings.Contains(err.Error(), "none.yaml") {
		t.Errorf("a missing file: %v", err)
	}
}

// TestExpressionsAreBounded: an expression that runs on or yields without
// end is an error naming it, not a hang.
func TestExpressionsAreBounded(t *testing.T) {
	for _, expr := range []string{`last(range(1e15))`, `range(1e6)`, `repeat(.)`} {
		q, err := compileQuery(expr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = q.run(map[string]any{})
		if err == nil || !strings.Contains(err.Error(), expr) || time.Since(start) > 10*evalTimeout {
			t.Errorf("%s: %v after %s", expr, err, time.Since(start))
		}
	}
	// A value of the wrong type is no value, as in kwok.
	q, _ := compileQuery(`.metadata.name.x`)
	if got, err := q.run(map[string]any{"metadata": map[string]any{"name": "a"}}); err != nil || len(got) != 0 {
		t.Errorf("indexing a string: %v, %v", got, err)
	}
}

// TestTemplatesAreBounded: counts past the bound are template errors, not
// a node's memory.
func TestTemplatesAreBounded(t *testing.T) {
	for _, tmpl := range []string{`a: {{ len (until 100000000) }}`, `a: {{ repeat 100000000 "x" }}`} {
		st, err := Parse("t.yaml", []byte(`{"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "s"},
			"spec": {"resourceRef": {"kind": "Pod"}, "selector": {}, "next": {"statusTemplate": `+quote(tmpl)+`}}}`), testEnv)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st[0].Steps()[0].Patch.Apply(objectOf(t, webPod(nil)), KindPod); err == nil || !strings.Contains(err.Error(), "at most 10000") {
			t.Errorf("%s: %v", tmpl, err)
		}
	}
}

// TestSetWith: stages added to a file's set join it by kind, and one with
// the kind and name of a file's stage is returned, the file's kept.
func TestSetWith(t *testing.T) {
	files := load(t, "pod-fast.yaml")
	extra := `{"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": %q},
		"spec": {"resourceRef": {"apiGroup": "v1", "kind": %q}, "selector": {}}}`
	var more []*Stage
	for _, s := range []struct{ name, kind string }{{"pod-run", KindPod}, {"pod-extra", KindPod}, {"node-extra", KindNode}} {
		st, err := ParseStage("the cluster", []byte(fmt.Sprintf(extra, s.name, s.kind)), testEnv)
		if err != nil {
			t.Fatal(err)
		}
		more = append(more, st)
	}
	set, clashes := files.With(more)
	if len(clashes) != 1 || clashes[0] != more[0] {
		t.Fatalf("clashes %v, want the cluster's pod-run", clashes)
	}
	if len(set.Pods()) != len(files.Pods())+1 || len(set.Nodes()) != len(files.Nodes())+1 {
		t.Errorf("%d pod and %d node stages, want %d and %d", len(set.Pods()), len(set.Nodes()), len(files.Pods())+1, len(files.Nodes())+1)
	}
	if !slices.Contains(set.Pods(), stageNamed(t, files.Pods(), "pod-run")) {
		t.Error("the file's pod-run is not in the set")
	}
	if _, clashes := (*Set)(nil).With(more); len(clashes) != 0 {
		t.Errorf("a nil set clashes with %v", clashes)
	}
}
