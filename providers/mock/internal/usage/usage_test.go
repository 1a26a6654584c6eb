package usage

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vkubelet/virtual-kubelet/providers/mock/internal/stage"
)

// fromAnnotationFile is kwok's published usage-from-annotation object.
const fromAnnotationFile = "testdata/usage-from-annotation.yaml"

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// load compiles a stage file holding data, as the mock loads one.
func load(t *testing.T, data string, opts Options) (*Set, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "u.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := stage.Load([]string{path}, stage.Env{OtherKinds: Kinds})
	if err != nil {
		return nil, err
	}
	return Compile(set.Foreign(), opts)
}

func mustLoad(t *testing.T, data string) *Set {
	t.Helper()
	set, err := load(t, data, Options{Now: func() time.Time { return epoch }})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func pod(annotations map[string]any, created time.Time) map[string]any {
	if annotations == nil {
		annotations = map[string]any{}
	}
	return map[string]any{"metadata": map[string]any{
		"name": "web", "namespace": "default", "annotations": annotations, "labels": map[string]any{},
		"creationTimestamp": created.Format(time.RFC3339),
	}}
}

func eval(t *testing.T, v *Value, vars Vars) uint64 {
	t.Helper()
	if v == nil {
		t.Fatal("no value")
	}
	got, err := v.Eval(context.Background(), vars)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestFromAnnotation(t *testing.T) {
	data, err := os.ReadFile(fromAnnotationFile)
	if err != nil {
		t.Fatal(err)
	}
	set := mustLoad(t, string(data))
	c := set.For("default", "web", "app")
	annotated := Vars{Pod: pod(map[string]any{"kwok.x-k8s.io/usage-cpu": "250m", "kwok.x-k8s.io/usage-memory": "64Mi"}, epoch)}
	if got := eval(t, c.CPU, annotated); got != 250_000_000 {
		t.Errorf("cpu %d nanocores, want 250m", got)
	}
	if got := eval(t, c.Memory, annotated); got != 64<<20 {
		t.Errorf("memory %d, want 64Mi", got)
	}
	plain := Vars{Pod: pod(nil, epoch)}
	if got := eval(t, c.CPU, plain); got != 1_000_000 {
		t.Errorf("cpu %d nanocores, want 1m", got)
	}
	if got := eval(t, c.Memory, plain); got != 1<<20 {
		t.Errorf("memory %d, want 1Mi", got)
	}
	if c.CPU.Object() != "ClusterResourceUsage usage-from-annotation" {
		t.Errorf("object %q", c.CPU.Object())
	}
}

func TestOverTime(t *testing.T) {
	now := epoch
	set, err := load(t, `
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterResourceUsage
metadata: {name: growing}
spec:
  usages:
  - usage:
      memory: {expression: '(pod.SinceSecond() / 60.0) * Quantity("1Mi")'}
      cpu: {expression: 'SinceSecond(pod) > 30.0 ? 2 : 0'}
`, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	c := set.For("any", "pod", "c")
	vars := Vars{Pod: pod(nil, epoch)}
	if got := eval(t, c.Memory, vars); got != 0 {
		t.Errorf("memory at creation %d, want 0", got)
	}
	if got := eval(t, c.CPU, vars); got != 0 {
		t.Errorf("cpu at creation %d, want 0", got)
	}
	now = epoch.Add(2 * time.Minute)
	if got := eval(t, c.Memory, vars); got != 2<<20 {
		t.Errorf("memory after 2m %d, want 2Mi", got)
	}
	if got := eval(t, c.CPU, vars); got != 2_000_000_000 {
		t.Errorf("cpu after 2m %d, want 2 cores (an int result)", got)
	}
}

func TestFunctions(t *testing.T) {
	set := mustLoad(t, `
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterResourceUsage
metadata: {name: f}
spec:
  usages:
  - containers: [now]
    usage:
      cpu: {expression: 'UnixSecond(Now()) - UnixSecond(node.metadata.creationTimestamp)'}
      memory: {expression: 'Rand() < 1.0 && Rand() >= 0.0 ? Quantity(container.resources.requests.memory) : 0.0'}
  - containers: [node]
    usage:
      cpu: {expression: 'node.SinceSecond() / 1000.0'}
`)
	node := map[string]any{"metadata": map[string]any{"name": "vk0", "creationTimestamp": epoch.Add(-time.Hour).Format(time.RFC3339)}}
	vars := Vars{Pod: pod(nil, epoch), Node: node, Container: map[string]any{"name": "now", "resources": map[string]any{"requests": map[string]any{"memory": "3Ki"}}}}
	c := set.For("default", "web", "now")
	if got := eval(t, c.CPU, vars); got != 3600_000_000_000 {
		t.Errorf("UnixSecond difference %d nanocores, want 3600 cores", got)
	}
	if got := eval(t, c.Memory, vars); got != 3<<10 {
		t.Errorf("memory %d, want 3Ki", got)
	}
	if got := eval(t, set.For("default", "web", "node").CPU, vars); got != 3_600_000_000 {
		t.Errorf("node age %d nanocores, want 3.6 cores", got)
	}
}

func TestPrecedence(t *testing.T) {
	set := mustLoad(t, `
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ResourceUsage
metadata: {name: web, namespace: shop}
spec:
  usages:
  - usage:
      cpu: {value: 100m}
  - containers: [sidecar]
    usage:
      cpu: {value: 5m}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterResourceUsage
metadata: {name: shop}
spec:
  selector: {matchNamespaces: [shop]}
  usages:
  - usage:
      cpu: {value: "1", expression: "2.0"}
      memory: {value: 1Gi}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterResourceUsage
metadata: {name: named}
spec:
  selector: {matchNames: [db]}
  usages:
  - usage:
      memory: {value: 2Gi}
`)
	cases := []struct {
		ns, name, container string
		cpu, mem            uint64
		none                bool
	}{
		{ns: "shop", name: "web", container: "app", cpu: 100_000_000, mem: 1 << 30},    // the pod's own, memory from the cluster one
		{ns: "shop", name: "web", container: "sidecar", cpu: 5_000_000, mem: 1 << 30},  // the group naming it wins
		{ns: "shop", name: "cart", container: "app", cpu: 1_000_000_000, mem: 1 << 30}, // value wins over expression
		{ns: "other", name: "db", container: "app", mem: 2 << 30},
		{ns: "other", name: "web", container: "app", none: true},
	}
	for _, tc := range cases {
		c := set.For(tc.ns, tc.name, tc.container)
		if tc.none {
			if c.CPU != nil || c.Memory != nil {
				t.Errorf("%s/%s: a usage for a pod no object selects", tc.ns, tc.name)
			}
			continue
		}
		if tc.cpu != 0 && eval(t, c.CPU, Vars{}) != tc.cpu {
			t.Errorf("%s/%s %s: cpu %d, want %d", tc.ns, tc.name, tc.container, eval(t, c.CPU, Vars{}), tc.cpu)
		}
		if tc.cpu == 0 && c.CPU != nil {
			t.Errorf("%s/%s %s: a cpu usage no object gives", tc.ns, tc.name, tc.container)
		}
		if eval(t, c.Memory, Vars{}) != tc.mem {
			t.Errorf("%s/%s %s: memory %d, want %d", tc.ns, tc.name, tc.container, eval(t, c.Memory, Vars{}), tc.mem)
		}
	}
}

// TestBadFiles: every bad object is one line at load naming the file, the
// object and the field.
func TestBadFiles(t *testing.T) {
	head := "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: ClusterResourceUsage\nmetadata: {name: bad}\n"
	cases := map[string]struct{ data, want string }{
		"malformed expression": {head + "spec: {usages: [{usage: {cpu: {expression: 'pod.metadata.'}}}]}", `(ClusterResourceUsage "bad"): spec.usages[0].usage.cpu.expression: `},
		"unknown variable":     {head + "spec: {usages: [{usage: {cpu: {expression: 'pods.x'}}}]}", `spec.usages[0].usage.cpu.expression: ERROR: <input>:1:1: undeclared reference to 'pods'`},
		"string result":        {head + "spec: {usages: [{usage: {memory: {expression: '\"1Mi\"'}}}]}", `spec.usages[0].usage.memory.expression: gives string, want a number`},
		"metric only":          {head + "spec: {usages: [{usage: {memory: {expression: 'pod.Usage(\"memory\")'}}}]}", `spec.usages[0].usage.memory.expression: Usage() reads the usage these objects give`},
		"cumulative":           {head + "spec: {usages: [{usage: {cpu: {expression: 'CumulativeUsage(pod, \"cpu\", container.name)'}}}]}", `CumulativeUsage() reads`},
		"unknown field":        {head + "spec: {usages: [{containerName: app}]}", `(ClusterResourceUsage "bad"): unknown field "spec.usages[0].containerName"`},
		"unknown resource":     {head + "spec: {usages: [{usage: {gpu: {value: '1'}}}]}", `spec.usages[0].usage.gpu: the mock simulates cpu and memory usage only`},
		"neither":              {head + "spec: {usages: [{usage: {cpu: {}}}]}", `spec.usages[0].usage.cpu: want value or expression`},
		"negative":             {head + "spec: {usages: [{usage: {cpu: {value: '-1'}}}]}", `spec.usages[0].usage.cpu.value: -1 is negative`},
		"bad quantity":         {head + "spec: {usages: [{usage: {cpu: {value: 'lots'}}}]}", `(ClusterResourceUsage "bad"): `},
		"no namespace":         {"apiVersion: kwok.x-k8s.io/v1alpha1\nkind: ResourceUsage\nmetadata: {name: web}\nspec: {}", `metadata.namespace: a ResourceUsage is named as its pod`},
		"selector on pod's":    {"apiVersion: kwok.x-k8s.io/v1alpha1\nkind: ResourceUsage\nmetadata: {name: web, namespace: a}\nspec: {selector: {}}", `spec.selector: a ResourceUsage's pod is the one of its name`},
		"twice":                {head + "spec: {}\n---\n" + head + "spec: {}", `document 2 (ClusterResourceUsage "bad"): an object of that kind and name is in stage file`},
		"wrong version":        {"apiVersion: kwok.x-k8s.io/v1\nkind: ClusterResourceUsage\nmetadata: {name: v}\nspec: {}", `apiVersion "kwok.x-k8s.io/v1": want kwok.x-k8s.io/v1alpha1`},
	}
	for name, tc := range cases {
		_, err := load(t, tc.data, Options{})
		if err == nil {
			t.Errorf("%s: loaded", name)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "stage file ") || !strings.Contains(msg, "u.yaml: document ") || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q: want one line naming the file and %q", name, msg, tc.want)
		}
	}
}

// TestMixedFile: a file holds Stages, usage objects and kwok's Metric
// (passed over), one by one or in a List.
func TestMixedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mixed.yaml")
	data := `
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: run}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector: {matchExpressions: [{key: .status.phase, operator: DoesNotExist}]}
  next: {statusTemplate: 'phase: Running'}
---
apiVersion: v1
kind: List
items:
- apiVersion: kwok.x-k8s.io/v1alpha1
  kind: Metric
  metadata: {name: metrics-resource}
  spec: {path: '/metrics/nodes/{nodeName}/metrics/resource'}
- apiVersion: kwok.x-k8s.io/v1alpha1
  kind: ResourceUsage
  metadata: {name: web, namespace: default}
  spec: {usages: [{usage: {cpu: {value: 10m}}}]}
`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	stages, err := stage.Load([]string{path}, stage.Env{OtherKinds: Kinds})
	if err != nil {
		t.Fatal(err)
	}
	if len(stages.Pods()) != 1 {
		t.Errorf("%d pod stages, want 1", len(stages.Pods()))
	}
	set, err := Compile(stages.Foreign(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := set.PassedOver(); len(got) != 1 || got[0] != "metrics-resource" {
		t.Errorf("passed over %q, want the Metric", got)
	}
	if got := eval(t, set.For("default", "web", "c").CPU, Vars{}); got != 10_000_000 {
		t.Errorf("cpu %d, want 10m", got)
	}
	// Without OtherKinds, the stage loader refuses them as before.
	if _, err := stage.Load([]string{path}, stage.Env{}); err == nil || !strings.Contains(err.Error(), "item 1") {
		t.Errorf("error %v: want the Metric refused", err)
	}
}

// costly nests comprehensions: 20^5 steps, far over the cost limit.
const costly = `[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19].map(a, [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19].map(b, [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19].map(c, [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19].map(d, [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19].map(e, a+b+c+d+e))))).size()`

// TestCostLimit: an expression that runs without bound is cut off with a
// CostLimitError naming the object and the limit.
func TestCostLimit(t *testing.T) {
	set := mustLoad(t, `
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterResourceUsage
metadata: {name: spin}
spec:
  usages:
  - usage:
      cpu: {expression: '`+costly+`'}
      memory: {expression: '[1].map(x, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa").size()'}
`)
	c := set.For("a", "b", "c")
	_, err := c.CPU.Eval(context.Background(), Vars{Pod: pod(nil, epoch)})
	var limit *CostLimitError
	if !errors.As(err, &limit) {
		t.Fatalf("error %v: want a CostLimitError", err)
	}
	if limit.Object != "ClusterResourceUsage spin" || limit.Limit != DefaultCostLimit {
		t.Errorf("error %+v: want the object and the default limit", limit)
	}
	if !strings.Contains(err.Error(), "cost limit 100000") {
		t.Errorf("message %q: want the limit named", err)
	}
	// A cheap expression under the same limit runs.
	if got := eval(t, c.Memory, Vars{}); got != 1 {
		t.Errorf("memory %d, want 1", got)
	}
}

// TestRuntimeErrors: an expression that fails on the pod it is given is an
// error naming the object, never a panic.
func TestRuntimeErrors(t *testing.T) {
	set := mustLoad(t, `
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterResourceUsage
metadata: {name: e}
spec:
  usages:
  - containers: [missing]
    usage: {cpu: {expression: 'Quantity(pod.metadata.annotations["nope"])'}}
  - containers: [badq]
    usage: {cpu: {expression: 'Quantity("lots")'}}
  - containers: [negative]
    usage: {cpu: {expression: '-1.0'}}
  - containers: [nan]
    usage: {cpu: {expression: '0.0 / 0.0'}}
  - containers: [dynstring]
    usage: {cpu: {expression: 'pod.metadata.name'}}
  - containers: [since]
    usage: {cpu: {expression: 'SinceSecond(container)'}}
  - containers: [huge]
    usage: {cpu: {expression: '1e300'}}
`)
	vars := Vars{Pod: pod(nil, epoch), Container: map[string]any{"name": "x"}}
	for _, c := range []string{"missing", "badq", "negative", "nan", "dynstring", "since"} {
		_, err := set.For("a", "b", c).CPU.Eval(context.Background(), vars)
		if err == nil || !strings.HasPrefix(err.Error(), "ClusterResourceUsage e: ") {
			t.Errorf("%s: error %v: want one naming the object", c, err)
		}
	}
	if got := eval(t, set.For("a", "b", "huge").CPU, vars); got != ^uint64(0) {
		t.Errorf("huge: %d, want the largest figure", got)
	}
}

// TestVarsFromJSON: the variables are API objects as JSON decodes them.
func TestVarsFromJSON(t *testing.T) {
	set := mustLoad(t, `
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterResourceUsage
metadata: {name: j}
spec:
  usages:
  - usage: {cpu: {expression: 'double(container.ports[0].containerPort) / 1000.0'}}
`)
	var c map[string]any
	if err := json.Unmarshal([]byte(`{"name":"app","ports":[{"containerPort":8080}]}`), &c); err != nil {
		t.Fatal(err)
	}
	if got := eval(t, set.For("a", "b", "app").CPU, Vars{Container: c}); got != 8_080_000_000 {
		t.Errorf("cpu %d, want 8.08 cores", got)
	}
}
