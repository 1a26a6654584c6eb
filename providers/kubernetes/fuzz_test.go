package kubernetes

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	psapi "k8s.io/pod-security-admission/api"
	"sigs.k8s.io/randfill"

	"github.com/vkubelet/virtual-kubelet/internal/testing/fuzzconfig"
)

// FuzzRemotePod: whatever pod A hands over, remotePod does not panic, and
// what it lets cross holds only what the policy allows: allowed annotations
// and volume types, mapped runtime classes, no host namespaces, privileged
// containers or host ports below the privileged level, none of A's
// scheduling, service account or image pull secrets, and references only to
// this node's copies.
func FuzzRemotePod(f *testing.F) {
	for _, seed := range []string{"", "\x00", "\x01privileged", "\x02restricted pod with volumes", strings.Repeat("\xff", 64)} {
		f.Add([]byte(seed))
	}
	levels := []string{"privileged", "baseline", "restricted"}
	f.Fuzz(func(t *testing.T, data []byte) {
		level := "baseline"
		if len(data) > 0 {
			level = levels[int(data[0])%len(levels)]
		}
		p := testProvider(t, Config{PodSecurity: level, RuntimeClasses: map[string]string{"gvisor": "runsc"}})
		pod := &corev1.Pod{}
		randfill.NewFromGoFuzz(data).NilChance(0.5).NumElements(0, 3).MaxDepth(8).Fill(pod)
		pod.Namespace, pod.Name = "team", "web"
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		for _, k := range []string{"mock.vkubelet.io/run-for", "k8s.v1.cni.cncf.io/networks", AnnotationSignature, LabelNode} {
			pod.Annotations[k] = "x"
		}
		if len(data) > 1 && data[1]%2 == 0 {
			pod.Spec.RuntimeClassName = nil
		}

		remote, err := p.remotePod(pod)
		if err != nil {
			return
		}
		for k := range remote.Annotations {
			if k != AnnotationSourceName && k != AnnotationSignature && !strings.HasPrefix(k, "mock.vkubelet.io/") {
				t.Errorf("annotation %q crossed", k)
			}
		}
		if len(remote.Labels) != 3 {
			t.Errorf("labels in B: %v", remote.Labels)
		}
		for _, v := range remote.Spec.Volumes {
			if typ := volumeType(&v.VolumeSource); !p.policy.volumeTypes[typ] {
				t.Errorf("volume %q of type %s crossed", v.Name, typ)
			}
			if v.Projected != nil {
				for _, s := range v.Projected.Sources {
					if s.ServiceAccountToken != nil || s.ClusterTrustBundle != nil || s.PodCertificate != nil {
						t.Errorf("projected volume %q crossed with %+v", v.Name, s)
					}
				}
			}
		}
		forEachObjectRef(&remote.Spec, func(kind string, name *string, _ *bool) {
			if !strings.HasPrefix(*name, p.names.namePrefix("team")) {
				t.Errorf("%s reference %q is not to a copy of this node", kind, *name)
			}
		})
		s := &remote.Spec
		if rc := s.RuntimeClassName; rc != nil && *rc != "runsc" {
			t.Errorf("runtimeClassName %q crossed unmapped", *rc)
		}
		if s.Overhead != nil || s.EphemeralContainers != nil || s.ServiceAccountName != "" || s.ImagePullSecrets != nil ||
			s.NodeName != "" || s.Affinity != nil || s.ResourceClaims != nil || s.SchedulingGates != nil || s.PriorityClassName != "" {
			t.Errorf("crossed: overhead %v, ephemeral %d, serviceAccount %q, pull secrets %v, nodeName %q, affinity %v, claims %v, gates %v, priority %q",
				s.Overhead, len(s.EphemeralContainers), s.ServiceAccountName, s.ImagePullSecrets, s.NodeName, s.Affinity, s.ResourceClaims, s.SchedulingGates, s.PriorityClassName)
		}
		if level == string(psapi.LevelPrivileged) {
			return
		}
		if s.HostNetwork || s.HostPID || s.HostIPC {
			t.Errorf("host namespaces crossed at %s: network %v pid %v ipc %v", level, s.HostNetwork, s.HostPID, s.HostIPC)
		}
		forEachContainer(s, func(c *corev1.Container) {
			if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
				t.Errorf("privileged container %q crossed at %s", c.Name, level)
			}
			for _, port := range c.Ports {
				if port.HostPort != 0 {
					t.Errorf("hostPort %d crossed at %s", port.HostPort, level)
				}
			}
		})
	})
}

// FuzzLoadConfig: whatever the provider config file holds, LoadConfig does
// not panic; a refusal names the file and the field; an accepted config
// has its defaults filled in and no annotation prefix under the provider's
// own, and written back loads the same (fuzzconfig.Check).
func FuzzLoadConfig(f *testing.F) {
	fuzzconfig.Fuzz(f, []string{
		"remote: {kubeconfig: /}\nnamespace: from-a\nsourceCluster: a\nsigningKeyFile: /k\n",
		"remote: {inCluster: true, qps: 500, burst: 1000}\nnamespacePrefix: a-\nsourceCluster: a\nsigningKeyFile: /k\n" +
			"capacity: {cpu: \"64\", memory: 256Gi}\nnode: {labels: {topology.kubernetes.io/region: b}, taints: [{key: burst, value: \"true\", effect: NoSchedule}]}\n" +
			"pods: {nodeSelector: {pool: burst}, tolerations: [{key: virtual-kubelet.io/provider, operator: Exists}], schedulerName: default-scheduler}\n" +
			"podSecurity: restricted\nvolumeTypes: [configMap, emptyDir]\nannotationPrefixes: [mock.vkubelet.io/]\nruntimeClasses: {gvisor: runsc}\n",
		"remote: {inCluster: true}\nnamespace: Bad_NS\nsourceCluster: a\nsigningKeyFile: /k\n",
		"remote: {inCluster: true}\nnamespace: b\nsourceCluster: a\nsigningKeyFile: /k\nannotationPrefixes: [" + systemPrefix + "x]\n",
		"remote: {inCluster: true, qps: -1}\n",
		"remote: {inCluster: true}\nnamespace: b\nsourceCluster: a\nsigningKeyFile: /k\nderiveCapacity: true\ncapacity: {cpu: \"1\"}\n",
		"remote: {inCluster: true}\nnamespace: b\nsourceCluster: a\nsigningKeyFile: /k\nnode: {taints: [{key: k, effect: Sometimes}]}\n",
		"remote: {inCluster: true}\nnamespace: b\nsourceCluster: a\nsigningKeyFile: /k\nservices: {select: all, namespaces: [team], labelSelector: \"expose=b,tier!=db\"}\n" +
			"home: {apiServer: \"https://a.example:6443\"}\nreflection: {maxObjects: 10, maxBytes: 1Mi}\n",
		"remote: {inCluster: true}\nnamespace: b\nsourceCluster: a\nsigningKeyFile: /k\nservices: {select: some}\n",
		"remote: {inCluster: true}\nnamespace: b\nsourceCluster: a\nsigningKeyFile: /k\nservices: {labelSelector: \"a in (\"}\n",
		"remote: {inCluster: true}\nnamespace: b\nsourceCluster: a\nsigningKeyFile: /k\nhome: {apiServer: \"http://user@a:99999/path\"}\n",
		"remote: {inCluster: true}\nnamespace: b\nsourceCluster: a\nsigningKeyFile: /k\nreflection: {maxObjects: -1, maxBytes: \"-1\"}\n",
		"{\"remote\": {\"inCluster\": true}, \"unknown\": 1}",
		"remote: [",
		"",
	}, LoadConfig, func(t *testing.T, cfg *Config) {
		if cfg.PodSecurity == "" || cfg.VolumeTypes == nil || cfg.AnnotationPrefixes == nil || cfg.Services.Select == "" ||
			cfg.Reflection.MaxObjects <= 0 || cfg.maxBytes() <= 0 {
			t.Fatalf("defaults not filled in: %+v", cfg)
		}
		for _, prefix := range cfg.AnnotationPrefixes {
			if prefix == "" || strings.HasPrefix(prefix, systemPrefix) {
				t.Fatalf("annotation prefix %q accepted", prefix)
			}
		}
	})
}
