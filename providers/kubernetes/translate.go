package kubernetes

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
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

// remotePod is the pod B runs for the source pod of A, which the pod
// controller hands over with its environment resolved except for the
// references to ConfigMaps and Secrets, which are renamed to the copies. A
// pod the policy refuses, or whose names do not fit B, is an
// errdefs.InvalidInput error naming the field.
func (p *Provider) remotePod(pod *corev1.Pod) (*corev1.Pod, error) {
	ns, err := p.names.remoteNamespace(pod.Namespace)
	if err != nil {
		return nil, err
	}
	name, err := p.names.remoteName(pod.Namespace, pod.Name)
	if err != nil {
		return nil, err
	}
	spec := pod.Spec.DeepCopy()

	// A's scheduling means nothing in B: the pod is bound to the virtual
	// node there. B's comes from the config.
	spec.NodeName = ""
	spec.NodeSelector = p.cfg.Pods.NodeSelector
	spec.Affinity = nil
	spec.Tolerations = p.cfg.Pods.Tolerations
	spec.SchedulerName = p.cfg.Pods.SchedulerName
	spec.TopologySpreadConstraints = nil
	spec.SchedulingGates = nil
	spec.PriorityClassName, spec.Priority, spec.PreemptionPolicy = "", nil, nil
	spec.ResourceClaims = nil
	if spec.RuntimeClassName, err = p.policy.runtimeClass(spec.RuntimeClassName); err != nil {
		return nil, err
	}
	// B's RuntimeClass admission sets the overhead of B's class and refuses
	// a pod that brings one of its own.
	spec.Overhead = nil
	// Ephemeral containers are added through their own subresource; B
	// refuses them on create.
	spec.EphemeralContainers = nil
	// B's pod is named <cluster>.<node>.<namespace>.<name>; its hostname
	// stays A's pod name, as A's kubelet would set it.
	if spec.Hostname == "" && len(validation.IsDNS1123Label(pod.Name)) == 0 {
		spec.Hostname = pod.Name
	}

	// B's service accounts mean nothing to A: B mounts none of its own.
	// A's token volumes are dropped, or with home set, taken out here and
	// put back after the policy check as volumes of the pod's token
	// Secret (homeIdentity), at the same mounts.
	spec.ServiceAccountName, spec.DeprecatedServiceAccount = "", ""
	spec.AutomountServiceAccountToken = ptr.To(false)
	dropped := map[string]bool{}
	var tokenVolumes []corev1.Volume
	volumes := spec.Volumes[:0]
	for _, v := range spec.Volumes {
		if isServiceAccountToken(v) {
			if p.home != nil {
				tokenVolumes = append(tokenVolumes, v)
			} else {
				dropped[v.Name] = true
			}
			continue
		}
		volumes = append(volumes, v)
	}
	spec.Volumes = volumes
	forEachContainer(spec, func(c *corev1.Container) {
		c.VolumeMounts = withoutMounts(c.VolumeMounts, dropped)
	})
	forEachObjectRef(spec, func(_ string, name *string, _ *bool) {
		if err == nil {
			*name, err = p.names.remoteName(pod.Namespace, *name)
		}
	})
	if err != nil {
		return nil, err
	}
	spec.ImagePullSecrets = nil
	// A's service link variables are in the env already; B's would be
	// those of B's namespace.
	spec.EnableServiceLinks = ptr.To(false)

	// Labels do not cross, or B's controllers could adopt the pod;
	// annotations only as the policy allows.
	annotations := p.policy.annotations(pod.Annotations)
	annotations[AnnotationSourceName] = pod.Name
	remote := &corev1.Pod{
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
	if err := p.policy.check(remote); err != nil {
		return nil, err
	}
	if p.home != nil {
		if err := p.home.tokenVolumes(pod, tokenVolumes); err != nil {
			return nil, err
		}
		remote.Spec.Volumes = append(remote.Spec.Volumes, tokenVolumes...)
		p.home.homeEnv(&remote.Spec)
	}
	p.trust.signPod(remote)
	return remote, nil
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

// Kinds of the objects pods refer to.
const (
	kindConfigMap = "configmap"
	kindSecret    = "secret"
)

// forEachObjectRef calls f with every reference of spec to a ConfigMap or
// Secret of its namespace, in volumes (but the ServiceAccount token's) and
// in the env, with the name to read or rename and whether it is optional.
func forEachObjectRef(spec *corev1.PodSpec, f func(kind string, name *string, optional *bool)) {
	for _, v := range spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			f(kindConfigMap, &v.ConfigMap.Name, v.ConfigMap.Optional)
		case v.Secret != nil:
			f(kindSecret, &v.Secret.SecretName, v.Secret.Optional)
		case v.Projected != nil && !isServiceAccountToken(v):
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					f(kindConfigMap, &s.ConfigMap.Name, s.ConfigMap.Optional)
				}
				if s.Secret != nil {
					f(kindSecret, &s.Secret.Name, s.Secret.Optional)
				}
			}
		}
	}
	forEachContainer(spec, func(c *corev1.Container) {
		for _, from := range c.EnvFrom {
			if r := from.ConfigMapRef; r != nil {
				f(kindConfigMap, &r.Name, r.Optional)
			}
			if r := from.SecretRef; r != nil {
				f(kindSecret, &r.Name, r.Optional)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				f(kindConfigMap, &r.Name, r.Optional)
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				f(kindSecret, &r.Name, r.Optional)
			}
		}
	})
}

// referencedObjects lists the ConfigMaps and Secrets a pod uses, by kind,
// each once: optional only if every use is.
func referencedObjects(spec *corev1.PodSpec) map[string][]objectRef {
	sets := map[string]*refSet{kindConfigMap: {}, kindSecret: {}}
	forEachObjectRef(spec, func(kind string, name *string, optional *bool) {
		sets[kind].add(*name, optional)
	})
	return map[string][]objectRef{kindConfigMap: sets[kindConfigMap].refs, kindSecret: sets[kindSecret].refs}
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

type objectRef struct {
	name     string
	optional bool
}

// localPod is what A is told of a pod in B: A's identity, B's spec and
// status, with the host IP of the virtual node.
func (p *Provider) localPod(remote *corev1.Pod) *corev1.Pod {
	ns, name, uid, _ := p.trust.sourceOf(remote)
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
