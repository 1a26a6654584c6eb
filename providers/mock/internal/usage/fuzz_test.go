package usage

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vkubelet/virtual-kubelet/providers/mock/internal/stage"
)

// fuzzVars are a pod, node and container as the mock hands them over.
func fuzzVars() Vars {
	return Vars{
		Pod:       pod(map[string]any{"kwok.x-k8s.io/usage-cpu": "250m"}, epoch),
		Node:      map[string]any{"metadata": map[string]any{"name": "vk0", "creationTimestamp": epoch.Format(time.RFC3339)}},
		Container: map[string]any{"name": "app", "image": "nginx"},
	}
}

// FuzzExpression: whatever an expression says, it compiles to a one-line
// error naming the field, or evaluates to a figure or an error within the
// cost limit, without panicking.
func FuzzExpression(f *testing.F) {
	for _, seed := range []string{
		`Quantity("1m")`,
		`"kwok.x-k8s.io/usage-cpu" in pod.metadata.annotations ? Quantity(pod.metadata.annotations["kwok.x-k8s.io/usage-cpu"]) : Quantity("1m")`,
		`(pod.SinceSecond() / 60.0) * Quantity("1Mi")`,
		`UnixSecond(Now()) - UnixSecond(node.metadata.creationTimestamp) + Rand()`,
		costly,
		`pod.Usage("memory")`,
		`[1,2,3].map(x, x * 2).size()`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		obj := map[string]any{
			"apiVersion": stage.APIVersion, "kind": KindClusterResourceUsage, "metadata": map[string]any{"name": "f"},
			"spec": map[string]any{"usages": []any{map[string]any{"usage": map[string]any{"cpu": map[string]any{"expression": expr}}}}},
		}
		data, err := json.Marshal(obj)
		if err != nil {
			t.Skip()
		}
		set, err := Compile([]stage.Foreign{{Kind: KindClusterResourceUsage, Where: "stage file f.yaml: document 1", JSON: data}}, Options{})
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, `stage file f.yaml: document 1 (ClusterResourceUsage "f"): spec.usages[0].usage.cpu`) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: not one line naming the object and the field", msg)
			}
			return
		}
		_, _ = set.For("default", "web", "app").CPU.Eval(context.Background(), fuzzVars())
	})
}

// FuzzObject: whatever an object holds, Compile returns a set or one line
// naming where it is, and the set's values evaluate without panicking.
func FuzzObject(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"kwok.x-k8s.io/v1alpha1","kind":"ResourceUsage","metadata":{"name":"web","namespace":"default"},"spec":{"usages":[{"containers":["app"],"usage":{"cpu":{"value":"100m"},"memory":{"expression":"Quantity(\"1Mi\")"}}}]}}`))
	f.Add([]byte(`{"apiVersion":"kwok.x-k8s.io/v1alpha1","kind":"ResourceUsage","metadata":{"name":"web"},"spec":{"selector":{}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, kind := range []string{KindResourceUsage, KindClusterResourceUsage} {
			set, err := Compile([]stage.Foreign{{Kind: kind, Where: "stage file f.yaml: document 1", JSON: data}}, Options{})
			if err != nil {
				if msg := err.Error(); !strings.HasPrefix(msg, "stage file f.yaml: document 1") || strings.Contains(msg, "\n") {
					t.Fatalf("error %q: not one line naming where", msg)
				}
				continue
			}
			c := set.For("default", "web", "app")
			for _, v := range []*Value{c.CPU, c.Memory} {
				if v != nil {
					_, _ = v.Eval(context.Background(), fuzzVars())
				}
			}
		}
	})
}
