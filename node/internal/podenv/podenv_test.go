package podenv

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func lookupWith(t testing.TB, objs ...any) Lookup {
	t.Helper()
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	cms, secrets, services := idx(), idx(), idx()
	for _, o := range objs {
		var err error
		switch o.(type) {
		case *corev1.ConfigMap:
			err = cms.Add(o)
		case *corev1.Secret:
			err = secrets.Add(o)
		case *corev1.Service:
			err = services.Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return Lookup{
		ConfigMaps: corev1listers.NewConfigMapLister(cms),
		Secrets:    corev1listers.NewSecretLister(secrets),
		Services:   corev1listers.NewServiceLister(services),
	}
}

func meta(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

func podWith(c corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-1",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"team": "a"}},
		Spec: corev1.PodSpec{
			NodeName: "vk0", ServiceAccountName: "sa", EnableServiceLinks: ptr.To(false),
			Containers: []corev1.Container{c},
		},
		Status: corev1.PodStatus{PodIP: "10.1.0.5", PodIPs: []corev1.PodIP{{IP: "10.1.0.5"}, {IP: "fd00::5"}}, HostIP: "10.213.0.2"},
	}
}

func envMap(vars []corev1.EnvVar) map[string]string {
	m := map[string]string{}
	for _, v := range vars {
		m[v.Name] = v.Value
	}
	return m
}

func TestResolveAllSources(t *testing.T) {
	l := lookupWith(t,
		&corev1.ConfigMap{ObjectMeta: meta("ns", "cfg"), Data: map[string]string{"MODE": "fast", "LEVEL": "3", "BAD=KEY": "x"}},
		&corev1.Secret{ObjectMeta: meta("ns", "sec"), Data: map[string][]byte{"PASSWORD": []byte("hunter2")}},
	)
	c := corev1.Container{
		Name:    "app",
		Command: []string{"run", "--mode=$(MODE)", "$$(MODE)", "$(UNDEFINED)"},
		Args:    []string{"$(GREETING)"},
		EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
			{Prefix: "S_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}},
		},
		Env: []corev1.EnvVar{
			{Name: "LEVEL", Value: "override-$(LEVEL)"},
			{Name: "GREETING", Value: "hello $(POD_NAME)"},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "APP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
			{Name: "TEAM", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['team']"}}},
			{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			{Name: "IPS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIPs"}}},
			{Name: "PASS", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "PASSWORD"}}},
			{Name: "MODE2", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "MODE"}}},
			{Name: "OPT", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Key: "x", Optional: ptr.To(true)}}},
			{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
			{Name: "MEM_MI", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.memory", Divisor: resource.MustParse("1Mi")}}},
			{Name: "EMPTY"},
		},
		Resources: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")},
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("300Mi")},
		},
	}
	pod := podWith(c)
	r, err := l.Resolve(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := r.Pod.Spec.Containers[0]
	want := map[string]string{
		"LEVEL": "override-3", "MODE": "fast", "S_PASSWORD": "hunter2",
		"GREETING": "hello $(POD_NAME)", // POD_NAME is defined after GREETING
		"POD_NAME": "p", "APP": "web", "TEAM": "a", "NODE": "vk0", "IPS": "10.1.0.5,fd00::5",
		"PASS": "hunter2", "MODE2": "fast", "CPU": "2", "MEM_MI": "300", "EMPTY": "",
	}
	if g := envMap(got.Env); !reflect.DeepEqual(g, want) {
		t.Errorf("env:\n got %v\nwant %v", g, want)
	}
	if got.EnvFrom != nil {
		t.Error("envFrom must be cleared once resolved")
	}
	// Order: envFrom keys (sorted) first, then env in declaration order.
	if got.Env[0].Name != "LEVEL" || got.Env[1].Name != "MODE" || got.Env[2].Name != "S_PASSWORD" || got.Env[3].Name != "GREETING" {
		t.Errorf("order: %v", got.Env[:4])
	}
	if w := []string{"run", "--mode=fast", "$(MODE)", "$(UNDEFINED)"}; !reflect.DeepEqual(got.Command, w) {
		t.Errorf("command = %q, want %q", got.Command, w)
	}
	if w := []string{"hello $(POD_NAME)"}; !reflect.DeepEqual(got.Args, w) {
		t.Errorf("args = %q, want %q", got.Args, w)
	}
	if !reflect.DeepEqual(r.InvalidKeys, []string{"BAD=KEY"}) {
		t.Errorf("invalid keys = %v", r.InvalidKeys)
	}
	if pod.Spec.Containers[0].EnvFrom == nil {
		t.Error("the input pod must not be modified")
	}
}

func TestResolveMissing(t *testing.T) {
	l := lookupWith(t, &corev1.ConfigMap{ObjectMeta: meta("ns", "cfg"), Data: map[string]string{"A": "1"}})
	ref := func(name, key string, optional bool) corev1.EnvVar {
		return corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: ptr.To(optional)}}}
	}
	cases := []struct {
		name    string
		c       corev1.Container
		wantErr string
		missing bool
	}{
		{"mandatory configmap", corev1.Container{Name: "c", Env: []corev1.EnvVar{ref("nope", "A", false)}}, `configmap "nope" not found`, true},
		{"mandatory key", corev1.Container{Name: "c", Env: []corev1.EnvVar{ref("cfg", "B", false)}}, "couldn't find key B in ConfigMap ns/cfg", true},
		{"optional configmap", corev1.Container{Name: "c", Env: []corev1.EnvVar{ref("nope", "A", true)}}, "", false},
		{"optional key", corev1.Container{Name: "c", Env: []corev1.EnvVar{ref("cfg", "B", true)}}, "", false},
		{"mandatory secret envFrom", corev1.Container{Name: "c", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}}}, `secret "s" not found`, true},
		{"optional secret envFrom", corev1.Container{Name: "c", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Optional: ptr.To(true)}}}}, "", false},
		{"bad field path", corev1.Container{Name: "c", Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nope"}}}}}, "unsupported fieldPath: spec.nope", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := l.Resolve(podWith(tc.c))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Pod.Spec.Containers[0].Env) != 0 {
					t.Errorf("optional reference must be skipped, got %v", r.Pod.Spec.Containers[0].Env)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			var me *MissingError
			if errors.As(err, &me) != tc.missing {
				t.Errorf("MissingError = %v, want %v", !tc.missing, tc.missing)
			}
		})
	}
}

func TestServiceLinks(t *testing.T) {
	svc := func(ns, name, ip string, ports ...corev1.ServicePort) *corev1.Service {
		return &corev1.Service{ObjectMeta: meta(ns, name), Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: ports}}
	}
	l := lookupWith(t,
		svc("default", "kubernetes", "10.0.0.1", corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}),
		svc("ns", "my-db", "10.0.0.7", corev1.ServicePort{Port: 5432}, corev1.ServicePort{Name: "metrics", Port: 9187, Protocol: corev1.ProtocolUDP}),
		svc("ns", "headless", corev1.ClusterIPNone, corev1.ServicePort{Port: 80}),
		svc("other", "elsewhere", "10.0.0.9", corev1.ServicePort{Port: 80}),
	)
	c := corev1.Container{Name: "c", Env: []corev1.EnvVar{{Name: "MY_DB_SERVICE_HOST", Value: "mine"}}}
	pod := podWith(c)
	pod.Spec.EnableServiceLinks = nil // defaults to true

	r, err := l.Resolve(pod)
	if err != nil {
		t.Fatal(err)
	}
	env := envMap(r.Pod.Spec.Containers[0].Env)
	want := map[string]string{
		"MY_DB_SERVICE_HOST":            "mine", // the pod's own definition wins
		"MY_DB_SERVICE_PORT":            "5432",
		"MY_DB_SERVICE_PORT_METRICS":    "9187",
		"MY_DB_PORT":                    "tcp://10.0.0.7:5432",
		"MY_DB_PORT_5432_TCP":           "tcp://10.0.0.7:5432",
		"MY_DB_PORT_5432_TCP_PROTO":     "tcp",
		"MY_DB_PORT_5432_TCP_PORT":      "5432",
		"MY_DB_PORT_5432_TCP_ADDR":      "10.0.0.7",
		"MY_DB_PORT_9187_UDP":           "udp://10.0.0.7:9187",
		"MY_DB_PORT_9187_UDP_PROTO":     "udp",
		"MY_DB_PORT_9187_UDP_PORT":      "9187",
		"MY_DB_PORT_9187_UDP_ADDR":      "10.0.0.7",
		"KUBERNETES_SERVICE_HOST":       "10.0.0.1",
		"KUBERNETES_SERVICE_PORT":       "443",
		"KUBERNETES_SERVICE_PORT_HTTPS": "443",
		"KUBERNETES_PORT":               "tcp://10.0.0.1:443",
		"KUBERNETES_PORT_443_TCP":       "tcp://10.0.0.1:443",
		"KUBERNETES_PORT_443_TCP_PROTO": "tcp",
		"KUBERNETES_PORT_443_TCP_PORT":  "443",
		"KUBERNETES_PORT_443_TCP_ADDR":  "10.0.0.1",
	}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("env:\n got %v\nwant %v", env, want)
	}

	// With service links off, only the master service remains.
	pod.Spec.EnableServiceLinks = ptr.To(false)
	r, err = l.Resolve(pod)
	if err != nil {
		t.Fatal(err)
	}
	for name := range envMap(r.Pod.Spec.Containers[0].Env) {
		if strings.HasPrefix(name, "MY_DB_PORT") {
			t.Errorf("service links disabled but %s is set", name)
		}
	}
	if envMap(r.Pod.Spec.Containers[0].Env)["KUBERNETES_SERVICE_HOST"] != "10.0.0.1" {
		t.Error("the kubernetes service variables are always set")
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two", "EMPTY": ""}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	cases := map[string]string{
		"":               "",
		"plain":          "plain",
		"$(A)":           "1",
		"x$(A)y$(B)z":    "x1ytwoz",
		"$(EMPTY)":       "",
		"$(MISSING)":     "$(MISSING)",
		"$$(A)":          "$(A)",
		"$$$(A)":         "$1",
		"$":              "$",
		"a$":             "a$",
		"$x":             "$x",
		"$(A":            "$(A",
		"$()":            "$()",
		"price: $5 $(B)": "price: $5 two",
		"$(A)$(A)$(A)":   "111",
	}
	for in, want := range cases {
		if got := Expand(in, lookup); got != want {
			t.Errorf("Expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"$(A)", "$$(A)", "$(", "$", "a$(B)c", "$(A$(B))"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// Without variables, expansion only ever removes escape characters.
		out := Expand(s, func(string) (string, bool) { return "", false })
		if len(out) > len(s) {
			t.Fatalf("Expand(%q) = %q grew with no variables defined", s, out)
		}
	})
}

// BenchmarkResolve resolves a typical pod: env from a ConfigMap and a
// Secret, downward API fields, and a namespace with a few services.
func BenchmarkResolve(b *testing.B) {
	objs := []any{
		&corev1.ConfigMap{ObjectMeta: meta("ns", "cfg"), Data: map[string]string{"MODE": "fast", "LEVEL": "3", "REGION": "eu"}},
		&corev1.Secret{ObjectMeta: meta("ns", "sec"), Data: map[string][]byte{"TOKEN": []byte("t")}},
		&corev1.Service{ObjectMeta: meta("default", "kubernetes"), Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1", Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}},
	}
	for _, n := range []string{"db", "cache", "api"} {
		objs = append(objs, &corev1.Service{ObjectMeta: meta("ns", n), Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.9", Ports: []corev1.ServicePort{{Port: 80}}}})
	}
	l := lookupWith(b, objs...)
	pod := podWith(corev1.Container{
		Name: "app", Command: []string{"run", "--mode=$(MODE)"},
		EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		Env: []corev1.EnvVar{
			{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "TOKEN"}}},
			{Name: "URL", Value: "http://$(POD):8080"},
		},
	})
	pod.Spec.EnableServiceLinks = nil
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Resolve(pod); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLimitWithoutLimitIsNodeAllocatable: a limits.* reference to a limit the
// container does not set resolves to the node's allocatable, as on a kubelet;
// requests and set limits are the container's own.
func TestLimitWithoutLimitIsNodeAllocatable(t *testing.T) {
	ref := func(name, res, divisor string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: res, Divisor: resource.MustParse(divisor)}}}
	}
	c := corev1.Container{
		Name: "c",
		Env: []corev1.EnvVar{
			ref("MEM_LIMIT_MI", "limits.memory", "1Mi"),
			ref("CPU_LIMIT", "limits.cpu", "1"),
			ref("CPU_REQUEST_M", "requests.cpu", "1m"),
		},
		Resources: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		},
	}
	allocatable := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20"), corev1.ResourceMemory: resource.MustParse("64Gi")}
	for _, tc := range []struct {
		name   string
		lookup Lookup
		want   map[string]string
	}{
		{"node allocatable known", Lookup{Node: func() *corev1.Node { return &corev1.Node{Status: corev1.NodeStatus{Allocatable: allocatable}} }},
			map[string]string{"MEM_LIMIT_MI": "65536", "CPU_LIMIT": "1", "CPU_REQUEST_M": "100"}},
		{"node allocatable unknown", Lookup{},
			map[string]string{"MEM_LIMIT_MI": "0", "CPU_LIMIT": "1", "CPU_REQUEST_M": "100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.lookup.Resolve(podWith(c))
			if err != nil {
				t.Fatal(err)
			}
			if got := envMap(r.Pod.Spec.Containers[0].Env); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("env = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestHostIPsFromNode: until the provider reports the pod's host IPs, they
// are the node's, as a kubelet knows them before it starts containers.
func TestHostIPsFromNode(t *testing.T) {
	node := &corev1.Node{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: "vk0"},
		{Type: corev1.NodeExternalIP, Address: "203.0.113.9"},
		{Type: corev1.NodeInternalIP, Address: "10.0.0.7"},
		{Type: corev1.NodeInternalIP, Address: "10.0.0.8"},
		{Type: corev1.NodeInternalIP, Address: "fd00::7"},
	}}}
	c := corev1.Container{Name: "c", Env: []corev1.EnvVar{
		{Name: "HOST_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
		{Name: "HOST_IPS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIPs"}}},
	}}
	l := Lookup{Node: func() *corev1.Node { return node }}

	fresh := podWith(c)
	fresh.Status = corev1.PodStatus{} // not yet reported by the provider
	r, err := l.Resolve(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := envMap(r.Pod.Spec.Containers[0].Env), map[string]string{"HOST_IP": "10.0.0.7", "HOST_IPS": "10.0.0.7,fd00::7"}; !reflect.DeepEqual(got, want) {
		t.Errorf("from the node: %v, want %v", got, want)
	}

	// The pod's own status wins once it has one.
	pod := podWith(c)
	pod.Status.HostIP, pod.Status.HostIPs = "10.9.9.9", []corev1.HostIP{{IP: "10.9.9.9"}}
	if r, err = l.Resolve(pod); err != nil {
		t.Fatal(err)
	}
	if got, want := envMap(r.Pod.Spec.Containers[0].Env), map[string]string{"HOST_IP": "10.9.9.9", "HOST_IPS": "10.9.9.9"}; !reflect.DeepEqual(got, want) {
		t.Errorf("from the pod: %v, want %v", got, want)
	}

	// Only external addresses: those.
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "203.0.113.9"}}
	if got := NodeHostIPs(node); !reflect.DeepEqual(got, []string{"203.0.113.9"}) {
		t.Errorf("external only: %v", got)
	}
	if got := NodeHostIPs(nil); got != nil {
		t.Errorf("no node: %v", got)
	}
}

// TestSkippedOptionalReferences: every missing optional reference is
// reported once, with the key when only the key is missing, so the
// controller can record an event per reference.
func TestSkippedOptionalReferences(t *testing.T) {
	l := lookupWith(t,
		&corev1.ConfigMap{ObjectMeta: meta("ns", "cfg"), Data: map[string]string{"A": "1"}},
		&corev1.Secret{ObjectMeta: meta("ns", "sec"), Data: map[string][]byte{"A": []byte("1")}},
	)
	cmKey := func(name, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: ptr.To(true)}}}
	}
	secretKey := func(name, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: "Y", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: ptr.To(true)}}}
	}
	c := corev1.Container{
		Name: "app",
		Env:  []corev1.EnvVar{cmKey("gone", "A"), cmKey("cfg", "B"), secretKey("sec", "B"), secretKey("vanished", "A"), cmKey("gone", "A")},
		EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "vanished"}, Optional: ptr.To(true)}}},
	}
	pod := podWith(c)
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "second", Env: []corev1.EnvVar{cmKey("gone", "A")}})
	r, err := l.Resolve(pod)
	if err != nil {
		t.Fatal(err)
	}
	want := []MissingError{
		{Kind: "Secret", Namespace: "ns", Name: "vanished"},
		{Kind: "ConfigMap", Namespace: "ns", Name: "gone"},
		{Kind: "ConfigMap", Namespace: "ns", Name: "cfg", Key: "B"},
		{Kind: "Secret", Namespace: "ns", Name: "sec", Key: "B"},
	}
	if !reflect.DeepEqual(r.SkippedOptional, want) {
		t.Errorf("skipped:\n got %+v\nwant %+v", r.SkippedOptional, want)
	}
}

// TestResourceRefOfAnotherContainer: resourceFieldRef.containerName selects
// whose requests and limits are read, as the kubelet does.
func TestResourceRefOfAnotherContainer(t *testing.T) {
	ref := func(name, container, res string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
			ContainerName: container, Resource: res, Divisor: resource.MustParse("1m")}}}
	}
	app := corev1.Container{
		Name: "app",
		Env: []corev1.EnvVar{
			ref("OWN", "", "limits.cpu"),
			ref("OWN_NAMED", "app", "limits.cpu"),
			ref("SIDECAR", "sidecar", "limits.cpu"),
			ref("SIDECAR_REQ", "sidecar", "requests.cpu"),
			ref("INIT", "setup", "requests.cpu"),
		},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
	}
	pod := podWith(app)
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "sidecar", Resources: corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")},
	}})
	pod.Spec.InitContainers = []corev1.Container{{Name: "setup", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")},
	}}}
	r, err := Lookup{}.Resolve(pod)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"OWN": "1000", "OWN_NAMED": "1000", "SIDECAR": "300", "SIDECAR_REQ": "200", "INIT": "50"}
	if got := envMap(r.Pod.Spec.Containers[0].Env); !reflect.DeepEqual(got, want) {
		t.Errorf("env = %v, want %v", got, want)
	}

	pod.Spec.Containers[0].Env = []corev1.EnvVar{ref("NOPE", "ghost", "limits.cpu")}
	_, err = Lookup{}.Resolve(pod)
	var invalid *InvalidError
	if !errors.As(err, &invalid) || !strings.Contains(err.Error(), `container "ghost" not found`) {
		t.Errorf("reference to an unknown container: err = %v, want an InvalidError naming it", err)
	}
}

func TestServiceVarsMemo(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "u1", ResourceVersion: "1"},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.0.0.7", Ports: []corev1.ServicePort{{Port: 5432}}},
	}
	var m ServiceVarsMemo
	first := m.get(svc)
	if again := m.get(svc); &again[0] != &first[0] {
		t.Error("the same service version was formatted twice")
	}
	moved := svc.DeepCopy()
	moved.ResourceVersion, moved.Spec.ClusterIP = "2", "10.0.0.8"
	if got := envMap(m.get(moved))["DB_SERVICE_HOST"]; got != "10.0.0.8" {
		t.Errorf("a new service version kept the old variables: DB_SERVICE_HOST=%s", got)
	}
	// Objects without identity (built by hand) are never confused.
	a, b := svc.DeepCopy(), svc.DeepCopy()
	a.UID, b.UID, b.Name = "", "", "cache"
	if envMap(m.get(a))["DB_SERVICE_HOST"] == "" || envMap(m.get(b))["CACHE_SERVICE_HOST"] == "" {
		t.Error("services without a UID were served each other's variables")
	}
}
