package mock

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vkubelet/virtual-kubelet/internal/testing/fuzzconfig"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// fuzzAnnotations reads the fuzzer's annotations: one "key=value" a line; a
// key without a "/" is one of the mock's (mock.vkubelet.io/ is prefixed),
// so that the fuzzer need not find the prefix itself.
func fuzzAnnotations(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		k, v, _ := strings.Cut(line, "=")
		if !strings.Contains(k, "/") {
			k = faultPrefix + k
		}
		out[k] = v
	}
	return out
}

// namesAnAnnotation fails t unless err names one of the pod's annotations.
func namesAnAnnotation(t *testing.T, err error, annotations map[string]string) {
	t.Helper()
	for k := range annotations {
		if strings.Contains(err.Error(), k) {
			return
		}
	}
	t.Fatalf("error names none of the annotations %v: %v", annotations, err)
}

// FuzzPodAnnotations: whatever a pod's author writes in the mock's
// annotations, parsing them does not panic; a refusal is an InvalidInput
// error naming the annotation; what is accepted keeps the documented
// bounds (durations at least their minimum, exit codes 0-255, hangs at most
// MaxHang) and reports the usage the annotation says, to the millicore and
// the byte.
func FuzzPodAnnotations(f *testing.F) {
	for _, seed := range []string{
		"run-for=30s\nexit-code=3\nrestart-delay=1s",
		"exit-code.app=256",
		"run-for.side=1ns",
		"cpu-usage=250m\nmemory-usage=64Mi\ncpu-usage.side=2",
		"readiness-probe=fail-for=10s, pass-for=5s, fail-after=30s\nliveness-probe.app=fail",
		"startup-probe=pass-for=0s",
		"fail-calls=CreatePod, GetPod\nfail-for=300ms\nhang-calls=*\nhang-for=1m",
		"hang-for=2m\nhang-calls=DeletePod",
		"fail-for=1s",
		"fail-calls=GetPods",
		"ignore-stop=true\nresize=defer\nresize-delay=2s",
		"resize=later",
		"fail-start=\nstart-delay=-1s",
		"log-interval=1ms\nlog-interval.init=100ms",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		annotations := fuzzAnnotations(s)
		pod := &corev1.Pod{}
		pod.Namespace, pod.Name, pod.Annotations = "ns", "p", annotations
		pod.Spec.InitContainers = []corev1.Container{{Name: "init"}}
		pod.Spec.Containers = []corev1.Container{{Name: "app"}, {Name: "side"}}

		scripts, err := parseScripts(pod)
		if err != nil {
			if !errdefs.IsInvalidInput(err) {
				t.Fatalf("refusal is not InvalidInput: %v", err)
			}
			namesAnAnnotation(t, err, annotations)
		} else {
			checkScript(t, "init", annotations, scripts.init[0])
			checkScript(t, "app", annotations, scripts.containers[0])
			checkScript(t, "side", annotations, scripts.containers[1])
		}

		faults, err := parseFaults(annotations, faultPrefix, podCalls)
		if err != nil {
			namesAnAnnotation(t, err, annotations)
		} else {
			checkFaults(t, faults, podCalls)
		}

		resize, err := parseResizeScript(annotations)
		if err != nil {
			if !errdefs.IsInvalidInput(err) {
				t.Fatalf("resize refusal is not InvalidInput: %v", err)
			}
			namesAnAnnotation(t, err, annotations)
		} else if resize.delay < 0 || resize.answer < resizeApply || resize.answer > resizeRefuse {
			t.Fatalf("resize script %+v", resize)
		}
	})
}

// checkScript checks the script parseScript accepted for container c.
func checkScript(t *testing.T, c string, annotations map[string]string, s script) {
	t.Helper()
	get := func(key string) (string, bool) {
		if v, ok := annotations[key+"."+c]; ok {
			return v, true
		}
		v, ok := annotations[key]
		return v, ok
	}
	for _, d := range []struct {
		key      string
		got, min time.Duration
	}{
		{AnnotationStartDelay, s.startDelay, 0},
		{AnnotationRunFor, s.runFor, MinRunFor},
		{AnnotationRestartDelay, s.restartDelay, MinRestartDelay},
		{AnnotationLogInterval, s.logInterval, MinLogInterval},
	} {
		v, ok := get(d.key)
		if !ok {
			continue
		}
		if want, _ := time.ParseDuration(v); d.got != want || d.got < d.min {
			t.Fatalf("container %s: %s %q read as %s (minimum %s)", c, d.key, v, d.got, d.min)
		}
	}
	if s.runFor != 0 && s.runFor < MinRunFor || s.restartDelay < MinRestartDelay || s.logInterval < MinLogInterval {
		t.Fatalf("container %s: script below the minimums: %+v", c, s)
	}
	if v, ok := get(AnnotationExitCode); ok {
		if want, _ := strconv.Atoi(v); int(s.exitCode) != want || want < 0 || want > 255 {
			t.Fatalf("container %s: exit code %q read as %d", c, v, s.exitCode)
		}
	}
	// Usage is reported as the annotation says: to the millicore (what
	// the stats carry) and to the byte.
	if v, ok := get(AnnotationCPUUsage); ok {
		q := resource.MustParse(v)
		want := q.AsApproximateFloat64() * 1e9
		if got := float64(s.nanoCores); math.Abs(got-want) > 1e6+want*1e-9 {
			t.Fatalf("container %s: cpu-usage %q reported as %d nanocores", c, v, s.nanoCores)
		}
	}
	if v, ok := get(AnnotationMemoryUsage); ok {
		q := resource.MustParse(v)
		want := q.AsApproximateFloat64()
		if got := float64(s.memory); math.Abs(got-want) > 1+want*1e-9 {
			t.Fatalf("container %s: memory-usage %q reported as %d bytes", c, v, s.memory)
		}
	}
	for kind, steps := range s.probes {
		for i, step := range steps {
			if step.lasts <= 0 && !(step.lasts == -1 && len(steps) == 1 && !step.pass) {
				t.Fatalf("container %s: %s probe step %d lasts %s", c, kind, i, step.lasts)
			}
		}
		steps.passes(0)
		steps.passes(math.MaxInt64)
	}
	if v, ok := get(AnnotationFailStart); ok && s.failStart != v && (v != "" || s.failStart == "") {
		t.Fatalf("container %s: fail-start %q read as %q", c, v, s.failStart)
	}
}

// checkFaults checks fault settings parseFaults accepted.
func checkFaults(t *testing.T, f faultSpec, allowed callSet) {
	t.Helper()
	if f.fail&^allowed != 0 || f.hang&^allowed != 0 {
		t.Fatalf("faults name calls outside %b: %+v", allowed, f)
	}
	if f.failFor < 0 || f.failFor > 0 && f.fail == 0 || f.hangFor < 0 || f.hangFor > 0 && f.hang == 0 || f.hangFor > MaxHang {
		t.Fatalf("fault durations out of bounds: %+v", f)
	}
}

// FuzzLoadConfig: whatever the provider config file holds, loadConfig does
// not panic; a refusal names the file, and the node when its entry is the
// problem; an accepted config has no negative capacity and faults within
// their bounds, and written back as the structured form it loads the same.
func FuzzLoadConfig(f *testing.F) {
	for _, seed := range []struct{ data, node string }{
		{`{"vk0": {"cpu": "32", "memory": "256Gi", "pods": "5000", "nvidia.com/gpu": "8"}}`, "vk0"},
		{`{"vk0": {"capacity": {"cpu": "32"}, "stateDir": "/var/lib/vk-mock/vk0", "faults": {"fail-calls": "*", "fail-for": "5m"}}}`, "vk0"},
		{`{"vk-*": {"stateDir": "/s", "faults": {"hang-calls": "GetPods", "hang-for": "10s"}}, "vk-1*": {"cpu": "1"}}`, "vk-12"},
		{`{"vk0": {"cpu": "-1"}}`, "vk0"},
		{`{"vk0": {"capacity": {"cpu": 8}}}`, "vk0"},
		{`{"vk0": {"faults": {"ignore-stop": "true"}}}`, "vk0"},
		{`{"vk0": {}} {}`, "vk0"},
		{"{\n\"vk0\": [}", "vk0"},
		{`[]`, "vk0"},
		{``, "vk0"},
		{`{"gpu-[0-3]": {"stateDir": ""}}`, "gpu-2"},
		{`{"vk0": {"maxCopiedBytes": "1Gi"}}`, "vk0"},
		{`{"vk0": {"maxCopiedBytes": "0.5"}}`, "vk0"},
	} {
		f.Add([]byte(seed.data), seed.node)
	}
	f.Fuzz(func(t *testing.T, data []byte, nodeName string) {
		path := fuzzconfig.File(t, data)
		cfg, err := loadConfig(path, nodeName)
		if err != nil {
			fuzzconfig.NamesFile(t, path, err)
			var nodes map[string]json.RawMessage
			if json.Unmarshal(data, &nodes) == nil && nodes[nodeName] != nil && !strings.Contains(err.Error(), fmt.Sprintf("node %q", nodeName)) &&
				!strings.Contains(err.Error(), "after the JSON object") {
				t.Fatalf("the error does not name node %q: %v", nodeName, err)
			}
			return
		}
		for name, q := range cfg.capacity {
			if q.Sign() < 0 {
				t.Fatalf("capacity %s is negative: %s", name, q.String())
			}
		}
		for name := range DefaultCapacity {
			if _, ok := cfg.capacity[name]; !ok {
				t.Fatalf("capacity lost the default %s", name)
			}
		}
		checkFaults(t, cfg.faults, nodeCalls)
		if cfg.copiedBytes <= 0 {
			t.Fatalf("maxCopiedBytes %d accepted", cfg.copiedBytes)
		}
		if cfg.faults.ignoreStop {
			t.Fatal("the config set ignore-stop, an annotation only")
		}
		if !utf8.ValidString(nodeName) {
			return // not a node name JSON can write back
		}

		again, err := loadConfig(fuzzconfig.File(t, structuredConfig(t, nodeName, cfg)), nodeName)
		if err != nil {
			t.Fatalf("an accepted config, written back, is refused: %v", err)
		}
		if again.stateDir != cfg.stateDir || again.faults != cfg.faults || again.copiedBytes != cfg.copiedBytes || len(again.capacity) != len(cfg.capacity) {
			t.Fatalf("written back, the config loads different: %+v, then %+v", cfg, again)
		}
		for name, q := range cfg.capacity {
			if q2 := again.capacity[name]; q.Cmp(q2) != 0 {
				t.Fatalf("capacity %s: %s, written back %s", name, q.String(), q2.String())
			}
		}
	})
}

// structuredConfig is cfg as the structured form of nodeName's entry.
func structuredConfig(t *testing.T, nodeName string, cfg config) []byte {
	t.Helper()
	entry := map[string]any{}
	capacity := map[string]string{}
	for name, q := range cfg.capacity {
		capacity[string(name)] = q.String()
	}
	entry["capacity"] = capacity
	if cfg.stateDir != "" {
		entry["stateDir"] = cfg.stateDir
	}
	faults := map[string]string{}
	calls := func(set callSet) string {
		var names []string
		for _, n := range callNames {
			if set.has(n.call) {
				names = append(names, n.name)
			}
		}
		return strings.Join(names, ",")
	}
	if cfg.faults.fail != 0 {
		faults["fail-calls"] = calls(cfg.faults.fail)
	}
	if cfg.faults.failFor != 0 {
		faults["fail-for"] = cfg.faults.failFor.String()
	}
	if cfg.faults.hang != 0 {
		faults["hang-calls"] = calls(cfg.faults.hang)
	}
	if cfg.faults.hangFor != 0 {
		faults["hang-for"] = cfg.faults.hangFor.String()
	}
	entry["faults"] = faults
	entry["maxCopiedBytes"] = strconv.FormatInt(cfg.copiedBytes, 10)
	data, err := json.Marshal(map[string]any{nodeName: entry})
	if err != nil {
		t.Fatal(err)
	}
	return data
}
