package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Back-links from an object in B to its source in A, and the mark of what
// this provider manages there.
const (
	// LabelNode names the virtual node (in A) whose provider owns the object.
	LabelNode = "virtual-kubelet.io/node"
	// LabelSourceNamespace is the namespace of the source object in A.
	LabelSourceNamespace = "virtual-kubelet.io/source-namespace"
	// LabelSourceUID is the UID of the source pod in A.
	LabelSourceUID = "virtual-kubelet.io/source-uid"
	// AnnotationSourceName is the name of the source object in A (an
	// annotation: names can be longer than a label value).
	AnnotationSourceName = "virtual-kubelet.io/source-name"
)

// namer maps A's namespace/name to B's.
type namer struct {
	namespace string // one namespace in B, or
	prefix    string // B namespace = prefix + A namespace
}

// remote returns where the object namespace/name of A lives in B. With one
// namespace in B the name carries the source namespace and a hash of both,
// so "a-b"/"c" and "a"/"b-c" do not collide.
func (n namer) remote(namespace, name string) (string, string) {
	if n.namespace == "" {
		return n.prefix + namespace, name
	}
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	suffix := hex.EncodeToString(sum[:4])
	base := namespace + "-" + name
	if max := 253 - len(suffix) - 1; len(base) > max {
		base = strings.TrimRight(base[:max], "-.")
	}
	return n.namespace, base + "-" + suffix
}

// remotePod is the pod B runs for the source pod of A, which the pod
// controller hands over with its environment resolved except for the
// references to ConfigMaps and Secrets, which are renamed to the copies.
func (p *Provider) remotePod(pod *corev1.Pod) *corev1.Pod {
	ns, name := p.names.remote(pod.Namespace, pod.Name)
	spec := pod.Spec.DeepCopy()

	// A's scheduling means nothing in B: the pod is bound to the virtual
	// node there. B's comes from the config.
	spec.NodeName = ""
	spec.NodeSelector = p.cfg.Pods.NodeSelector
	spec.Affinity = nil
	spec.Tolerations = p.cfg.Pods.Tolerations
	spec.SchedulerName = p.cfg.Pods.SchedulerName
	spec.TopologySpreadConstraints = nil
	spec.PriorityClassName, spec.Priority, spec.PreemptionPolicy = "", nil, nil
	spec.RuntimeClassName = nil
	spec.ResourceClaims = nil

	// A's service account token cannot be served by B (see the README):
	// the projected kube-api-access volume is dropped and B mounts none.
	spec.ServiceAccountName, spec.DeprecatedServiceAccount = "", ""
	spec.AutomountServiceAccountToken = ptr.To(false)
	dropped := map[string]bool{}
	volumes := spec.Volumes[:0]
	for _, v := range spec.Volumes {
		if isServiceAccountToken(v) {
			dropped[v.Name] = true
			continue
		}
		p.renameVolumeSources(pod.Namespace, &v)
		volumes = append(volumes, v)
	}
	spec.Volumes = volumes
	forEachContainer(spec, func(c *corev1.Container) {
		c.VolumeMounts = withoutMounts(c.VolumeMounts, dropped)
		p.renameEnvSources(pod.Namespace, c)
	})
	spec.ImagePullSecrets = nil
	// A's service link variables are in the env already; B's would be
	// those of B's namespace.
	spec.EnableServiceLinks = ptr.To(false)

	// Annotations cross over (they script the mock provider, for one);
	// labels do not, or B's controllers could adopt the pod.
	annotations := make(map[string]string, len(pod.Annotations)+1)
	for k, v := range pod.Annotations {
		annotations[k] = v
	}
	annotations[AnnotationSourceName] = pod.Name
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      name,
			Labels: map[string]string{
				LabelNode:            p.nodeName,
				LabelSourceNamespace: pod.Namespace,
				LabelSourceUID:       string(pod.UID),
			},
			Annotations: annotations,
		},
		Spec: *spec,
	}
}

// isServiceAccountToken reports the projected volume the ServiceAccount
// admission plugin adds (kube-api-access-*): a token source plus the CA.
func isServiceAccountToken(v corev1.Volume) bool {
	if v.Projected == nil {
		return false
	}
	for _, s := range v.Projected.Sources {
		if s.ServiceAccountToken != nil {
			return true
		}
	}
	return false
}

func withoutMounts(mounts []corev1.VolumeMount, dropped map[string]bool) []corev1.VolumeMount {
	if len(dropped) == 0 {
		return mounts
	}
	out := mounts[:0]
	for _, m := range mounts {
		if !dropped[m.Name] {
			out = append(out, m)
		}
	}
	return out
}

// renameVolumeSources points ConfigMap and Secret volumes at the copies in B.
func (p *Provider) renameVolumeSources(namespace string, v *corev1.Volume) {
	rename := func(name string) string { _, n := p.names.remote(namespace, name); return n }
	if v.ConfigMap != nil {
		v.ConfigMap.Name = rename(v.ConfigMap.Name)
	}
	if v.Secret != nil {
		v.Secret.SecretName = rename(v.Secret.SecretName)
	}
	if v.Projected != nil {
		for i := range v.Projected.Sources {
			s := &v.Projected.Sources[i]
			if s.ConfigMap != nil {
				s.ConfigMap.Name = rename(s.ConfigMap.Name)
			}
			if s.Secret != nil {
				s.Secret.Name = rename(s.Secret.Name)
			}
		}
	}
}

// referencedObjects lists the ConfigMaps and Secrets of A a pod uses, in
// volumes and in env (the pod controller keeps env references, see
// CopiesEnvObjects), each once: optional only if every use is.
func referencedObjects(pod *corev1.Pod) (configMaps, secrets []objectRef) {
	var cms, secs refSet
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			cms.add(v.ConfigMap.Name, v.ConfigMap.Optional)
		case v.Secret != nil:
			secs.add(v.Secret.SecretName, v.Secret.Optional)
		case v.Projected != nil && !isServiceAccountToken(v):
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					cms.add(s.ConfigMap.Name, s.ConfigMap.Optional)
				}
				if s.Secret != nil {
					secs.add(s.Secret.Name, s.Secret.Optional)
				}
			}
		}
	}
	forEachContainer(&pod.Spec, func(c *corev1.Container) {
		for _, from := range c.EnvFrom {
			if from.ConfigMapRef != nil {
				cms.add(from.ConfigMapRef.Name, from.ConfigMapRef.Optional)
			}
			if from.SecretRef != nil {
				secs.add(from.SecretRef.Name, from.SecretRef.Optional)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				cms.add(r.Name, r.Optional)
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				secs.add(r.Name, r.Optional)
			}
		}
	})
	return cms.refs, secs.refs
}

// refSet collects references in order of first use.
type refSet struct{ refs []objectRef }

func (s *refSet) add(name string, optional *bool) {
	opt := ptr.Deref(optional, false)
	for i := range s.refs {
		if s.refs[i].name == name {
			s.refs[i].optional = s.refs[i].optional && opt
			return
		}
	}
	s.refs = append(s.refs, objectRef{name, opt})
}

// forEachContainer calls f with every container of spec: init, regular and
// ephemeral.
func forEachContainer(spec *corev1.PodSpec, f func(*corev1.Container)) {
	for i := range spec.InitContainers {
		f(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		f(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		f((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
}

// renameEnvSources points env and envFrom references at the copies in B.
func (p *Provider) renameEnvSources(namespace string, c *corev1.Container) {
	rename := func(name string) string { _, n := p.names.remote(namespace, name); return n }
	for i := range c.EnvFrom {
		if r := c.EnvFrom[i].ConfigMapRef; r != nil {
			r.Name = rename(r.Name)
		}
		if r := c.EnvFrom[i].SecretRef; r != nil {
			r.Name = rename(r.Name)
		}
	}
	for i := range c.Env {
		if c.Env[i].ValueFrom == nil {
			continue
		}
		if r := c.Env[i].ValueFrom.ConfigMapKeyRef; r != nil {
			r.Name = rename(r.Name)
		}
		if r := c.Env[i].ValueFrom.SecretKeyRef; r != nil {
			r.Name = rename(r.Name)
		}
	}
}

type objectRef struct {
	name     string
	optional bool
}

// sourceOf returns A's namespace, name and UID of a pod in B, or ok false
// for a pod without back-links.
func sourceOf(remote *corev1.Pod) (namespace, name string, uid types.UID, ok bool) {
	namespace = remote.Labels[LabelSourceNamespace]
	name = remote.Annotations[AnnotationSourceName]
	uid = types.UID(remote.Labels[LabelSourceUID])
	return namespace, name, uid, namespace != "" && name != "" && uid != ""
}

// localPod is what A is told of a pod in B: A's identity, B's spec and
// status, with the host IP of the virtual node.
func (p *Provider) localPod(remote *corev1.Pod) *corev1.Pod {
	ns, name, uid, _ := sourceOf(remote)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, CreationTimestamp: remote.CreationTimestamp},
		Spec:       *remote.Spec.DeepCopy(),
		Status:     *remote.Status.DeepCopy(),
	}
	pod.Spec.NodeName = p.nodeName
	if p.InternalIP != "" {
		pod.Status.HostIP = p.InternalIP
		pod.Status.HostIPs = []corev1.HostIP{{IP: p.InternalIP}}
	}
	// B's scheduler conditions (PodScheduled in B) describe B, not A.
	pod.Status.NominatedNodeName = ""
	return pod
}
