package intern

import corev1 "k8s.io/api/core/v1"

// Pod replaces in place the values of pod that pods repeat with the
// shared instances. pod must not be shared yet: an informer's transform
// is the place. A nil Interner shares the pod's strings only.
func (in *Interner) Pod(pod *corev1.Pod) {
	if in == nil {
		in = &stringsOnly
	}
	m := &pod.ObjectMeta
	m.Namespace, m.GenerateName = String(m.Namespace), String(m.GenerateName)
	m.Labels, m.Annotations = in.StringMap(m.Labels), in.StringMap(m.Annotations)
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind, r.Name = String(r.APIVersion), String(r.Kind), String(r.Name)
	}
	each(m.Finalizers)
	in.spec(&pod.Spec)
	in.status(&pod.Status, pod.Spec.Volumes)
}

func (in *Interner) spec(s *corev1.PodSpec) {
	s.NodeName, s.SchedulerName, s.PriorityClassName = String(s.NodeName), String(s.SchedulerName), String(s.PriorityClassName)
	s.ServiceAccountName, s.DeprecatedServiceAccount = String(s.ServiceAccountName), String(s.DeprecatedServiceAccount)
	s.DNSPolicy, s.RestartPolicy = corev1.DNSPolicy(String(string(s.DNSPolicy))), corev1.RestartPolicy(String(string(s.RestartPolicy)))
	s.NodeSelector = in.StringMap(s.NodeSelector)
	s.Tolerations = in.Tolerations(s.Tolerations)
	s.SecurityContext = sharePointer(in.podSecurityContexts, s.SecurityContext)
	s.Affinity = sharePointer(in.affinities, s.Affinity)
	for i := range s.Volumes {
		s.Volumes[i].VolumeSource = in.VolumeSource(s.Volumes[i].VolumeSource)
	}
	for _, list := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range list {
			in.container(&list[i], s.Volumes)
		}
	}
	in.Requirements(s.Resources)
	s.Overhead = in.ResourceList(s.Overhead)
}

func (in *Interner) container(c *corev1.Container, volumes []corev1.Volume) {
	c.Name, c.Image, c.WorkingDir = String(c.Name), String(c.Image), String(c.WorkingDir)
	c.ImagePullPolicy = corev1.PullPolicy(String(string(c.ImagePullPolicy)))
	c.TerminationMessagePath = String(c.TerminationMessagePath)
	c.TerminationMessagePolicy = corev1.TerminationMessagePolicy(String(string(c.TerminationMessagePolicy)))
	each(c.Command)
	each(c.Args)
	for i := range c.Env {
		e := &c.Env[i]
		e.Name, e.Value = String(e.Name), String(e.Value)
	}
	c.Env = in.EnvVars(c.Env)
	for i := range c.Ports {
		p := &c.Ports[i]
		p.Name, p.Protocol = String(p.Name), corev1.Protocol(String(string(p.Protocol)))
	}
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		m.Name, m.MountPath, m.SubPath = volumeName(m.Name, volumes), String(m.MountPath), String(m.SubPath)
	}
	in.Requirements(&c.Resources)
	c.SecurityContext = sharePointer(in.securityContexts, c.SecurityContext)
	c.LivenessProbe = sharePointer(in.probes, c.LivenessProbe)
	c.ReadinessProbe = sharePointer(in.probes, c.ReadinessProbe)
	c.StartupProbe = sharePointer(in.probes, c.StartupProbe)
}

// volumeName is the name of the pod's volume called name. Volume names are
// often the pod's own (kube-api-access-xxxxx): they are shared within the
// pod, not made canonical by String.
func volumeName(name string, volumes []corev1.Volume) string {
	for i := range volumes {
		if volumes[i].Name == name {
			return volumes[i].Name
		}
	}
	return name
}

func (in *Interner) status(s *corev1.PodStatus, volumes []corev1.Volume) {
	s.Phase, s.QOSClass = corev1.PodPhase(String(string(s.Phase))), corev1.PodQOSClass(String(string(s.QOSClass)))
	s.HostIP, s.Reason, s.Message = String(s.HostIP), String(s.Reason), String(s.Message)
	// The first of the IPs repeats the primary one; a pod's IPs are its own.
	if len(s.HostIPs) > 0 && s.HostIPs[0].IP == s.HostIP {
		s.HostIPs[0].IP = s.HostIP
	}
	if len(s.PodIPs) > 0 && s.PodIPs[0].IP == s.PodIP {
		s.PodIPs[0].IP = s.PodIP
	}
	for i := range s.Conditions {
		c := &s.Conditions[i]
		c.Type, c.Status = corev1.PodConditionType(String(string(c.Type))), corev1.ConditionStatus(String(string(c.Status)))
		c.Reason, c.Message = String(c.Reason), String(c.Message)
	}
	for _, list := range [][]corev1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			in.containerStatus(&list[i], volumes)
		}
	}
	s.AllocatedResources = in.ResourceList(s.AllocatedResources)
	in.Requirements(s.Resources)
}

func (in *Interner) containerStatus(c *corev1.ContainerStatus, volumes []corev1.Volume) {
	c.Name, c.Image, c.ImageID = String(c.Name), String(c.Image), String(c.ImageID)
	for _, st := range []*corev1.ContainerState{&c.State, &c.LastTerminationState} {
		if w := st.Waiting; w != nil {
			w.Reason = String(w.Reason)
		}
		if t := st.Terminated; t != nil {
			t.Reason = String(t.Reason)
		}
	}
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		m.Name, m.MountPath = volumeName(m.Name, volumes), String(m.MountPath)
	}
	c.AllocatedResources = in.ResourceList(c.AllocatedResources)
	in.Requirements(c.Resources)
}

func each(list []string) {
	for i := range list {
		list[i] = String(list[i])
	}
}
