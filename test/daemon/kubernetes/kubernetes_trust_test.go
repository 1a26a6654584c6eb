//go:build e2e

package kubernetes_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	k8sprovider "github.com/vkubelet/virtual-kubelet/providers/kubernetes"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// tenant returns a client acting as a user who may do anything with pods,
// ConfigMaps and Secrets in namespace ns of c, and nothing else: a Role and
// RoleBinding made by the admin, used through impersonation.
func tenant(t *testing.T, c *testcluster.Cluster, ns string) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	user := testcluster.UniqueName("tenant")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"pods", "pods/log", "pods/exec", "pods/ephemeralcontainers", "configmaps", "secrets"}, Verbs: []string{"*"},
	}}}
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The tenant is confined to its namespace.
	if _, err := client.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("tenant %s lists kube-system's Secrets: %v", user, err)
	}
	return client
}

// TestKubernetesProviderTrustBoundary attacks the kubernetes provider as
// the tenants of A and of B would, each with a namespace-scoped account:
// every attack ends refused in A with a message naming the field, or
// harmless (nothing of A's appears in B, nothing of B's reaches A, nothing
// of B's users is deleted), while compliant pods still run.
func TestKubernetesProviderTrustBoundary(t *testing.T) {
	tc := startTwoClusters(t)
	ctx := context.Background()
	tenantA := tenant(t, tc.a, tc.ns)
	tenantB := tenant(t, tc.b, tc.remoteNS)

	// A's admin's Secret, which no tenant may read.
	topsecret := testcluster.UniqueName("topsecret")
	if _, err := tc.a.Client.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: topsecret},
		StringData: map[string]string{"token": "the-crown-jewels"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tc.a.Client.CoreV1().Secrets("kube-system").Delete(context.Background(), topsecret, metav1.DeleteOptions{})
	})
	// noJewelsInB fails the test if the value of A's Secret is in B.
	noJewelsInB := func(t *testing.T) {
		t.Helper()
		secrets, err := tc.b.Client.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets.Items {
			for _, v := range s.Data {
				if string(v) == "the-crown-jewels" {
					t.Errorf("A's kube-system/%s is in B as %s/%s", topsecret, s.Namespace, s.Name)
				}
			}
		}
	}

	// The tenant of A's ConfigMap and Secret, which compliant pods use.
	for _, obj := range []struct{ cm, secret string }{{"settings", "creds"}} {
		if _, err := tenantA.CoreV1().ConfigMaps(tc.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: obj.cm},
			Data: map[string]string{"color": "blue"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := tenantA.CoreV1().Secrets(tc.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: obj.secret},
			StringData: map[string]string{"password": "hunter2"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	compliant := func(name, node string) *corev1.Pod {
		p := tc.pod(name, corev1.Container{Name: "app", Image: "busybox", Env: []corev1.EnvVar{{Name: "WHO", Value: "ours"}}, SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}})
		p.Spec.NodeName = node
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		p.Annotations = map[string]string{mock.AnnotationCPUUsage: "100m", "sidecar.istio.io/inject": "true"}
		p.Spec.Volumes = []corev1.Volume{
			{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
			{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
			{Name: "both", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}},
			}}}},
		}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "settings", MountPath: "/s"}, {Name: "creds", MountPath: "/c"}, {Name: "both", MountPath: "/b"}}
		return p
	}
	createAs := func(t *testing.T, client kubernetes.Interface, p *corev1.Pod) {
		t.Helper()
		if _, err := client.CoreV1().Pods(tc.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("restricted pod with configmap, secret and projected volumes runs", func(t *testing.T) {
		createAs(t, tenantA, compliant("good", tc.node.Name))
		daemontest.WaitPod(t, tc.a.Client, tc.ns, "good", "Running", isRunning)
		r := tc.remotePods(t)["good"]
		if len(r) != 1 || r[0].Annotations["sidecar.istio.io/inject"] != "" || r[0].Annotations[mock.AnnotationCPUUsage] != "100m" {
			t.Fatalf("good in B: %+v", r)
		}
		if want := "a." + tc.node.Name + "." + tc.ns + ".good"; r[0].Name != want {
			t.Errorf("B's pod is %s, want %s", r[0].Name, want)
		}
		if got := r[0].Spec.Volumes[0].ConfigMap.Name; got != "a."+tc.node.Name+"."+tc.ns+".settings" {
			t.Errorf("B's pod mounts ConfigMap %s", got)
		}
	})

	for _, attack := range []struct {
		name, field string
		change      func(*corev1.Pod)
	}{
		{"privileged", `securityContext.privileged=true`, func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}},
		{"hostpath", "spec.volumes[root]: volume type hostPath", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}},
		{"hostnetwork", "hostNetwork=true", func(p *corev1.Pod) { p.Spec.HostNetwork = true }},
		{"hostpid", "hostPID=true", func(p *corev1.Pod) { p.Spec.HostPID = true }},
		{"hostport", `uses hostPort 8080`, func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
		}},
		{"pvc", "spec.volumes[data]: volume type persistentVolumeClaim", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "b-database"}}})
		}},
	} {
		t.Run("refused: "+attack.name, func(t *testing.T) {
			p := compliant("attack-"+attack.name, tc.node.Name)
			p.Spec.SecurityContext = nil // the namespace of A enforces nothing
			attack.change(p)
			createAs(t, tenantA, p)
			refused := daemontest.WaitPod(t, tc.a.Client, tc.ns, p.Name, "refused", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
			if refused.Status.Reason != "ProviderRejected" || !strings.Contains(refused.Status.Message, attack.field) {
				t.Errorf("status %s: %q, want ProviderRejected naming %q", refused.Status.Reason, refused.Status.Message, attack.field)
			}
			if n := len(tc.remotePods(t)[p.Name]); n != 0 {
				t.Errorf("%d pods in B for a refused pod", n)
			}
		})
	}

	t.Run("refused: unmapped runtimeClass", func(t *testing.T) {
		class := testcluster.UniqueName("sandbox")
		if _, err := tc.a.Client.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Handler: "runsc"}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = tc.a.Client.NodeV1().RuntimeClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
		})
		p := compliant("attack-runtimeclass", tc.node.Name)
		p.Spec.RuntimeClassName = &class
		createAs(t, tenantA, p)
		refused := daemontest.WaitPod(t, tc.a.Client, tc.ns, p.Name, "refused", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		if want := fmt.Sprintf("spec.runtimeClassName: %q has no counterpart", class); refused.Status.Reason != "ProviderRejected" || !strings.Contains(refused.Status.Message, want) {
			t.Errorf("status %s: %q, want ProviderRejected naming %q", refused.Status.Reason, refused.Status.Message, want)
		}
		if n := len(tc.remotePods(t)[p.Name]); n != 0 {
			t.Errorf("%d pods in B for a refused pod", n)
		}
	})

	// resynced waits until the provider has copied a change of A's
	// ConfigMap "settings" to B twice, so at least one full round of resync
	// and collection ran after what came before.
	resynced := func(t *testing.T) {
		t.Helper()
		copyName := "a." + tc.node.Name + "." + tc.ns + ".settings"
		for _, color := range []string{testcluster.UniqueName("c1"), testcluster.UniqueName("c2")} {
			cm, err := tenantA.CoreV1().ConfigMaps(tc.ns).Get(ctx, "settings", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cm.Data["color"] = color
			if _, err := tenantA.CoreV1().ConfigMaps(tc.ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			daemontest.Eventually(t, "the copy of settings in B at "+color, func() (bool, string) {
				c, err := tc.b.Client.CoreV1().ConfigMaps(tc.remoteNS).Get(ctx, copyName, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				return c.Data["color"] == color, c.Data["color"]
			})
		}
	}

	t.Run("harmless: forged Secret in B naming kube-system of A", func(t *testing.T) {
		forged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "a." + tc.node.Name + ".kube-system." + topsecret,
			Labels:      map[string]string{k8sprovider.LabelNode: tc.node.Name, k8sprovider.LabelSourceNamespace: "kube-system"},
			Annotations: map[string]string{k8sprovider.AnnotationSourceName: topsecret}}}
		// Its signature replayed from one of the provider's copies.
		good := tc.remotePods(t)["good"][0]
		copyName := good.Spec.Volumes[1].Secret.SecretName
		ours, err := tenantB.CoreV1().Secrets(tc.remoteNS).Get(ctx, copyName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		forged.Annotations[k8sprovider.AnnotationSignature] = ours.Annotations[k8sprovider.AnnotationSignature]
		if _, err := tenantB.CoreV1().Secrets(tc.remoteNS).Create(ctx, forged, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		resynced(t)
		noJewelsInB(t)
		if _, err := tenantB.CoreV1().Secrets(tc.remoteNS).Get(ctx, forged.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("the forged Secret, an object of B's tenant, was deleted: %v", err)
		}
	})

	t.Run("harmless: forged pod in B", func(t *testing.T) {
		good, err := tc.a.Client.CoreV1().Pods(tc.ns).Get(ctx, "good", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ours := tc.remotePods(t)["good"][0]
		workers, err := tc.b.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(workers.Items) == 0 {
			t.Fatalf("B's nodes: %v", err)
		}
		// It claims to be A's pod "good" (labels, annotations and signature
		// copied from the provider's pod) and runs on B's workers.
		forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "forged", Labels: ours.Labels, Annotations: ours.Annotations},
			Spec: corev1.PodSpec{NodeName: workers.Items[0].Name, Tolerations: daemontest.Tolerate, Containers: []corev1.Container{{Name: "app", Image: "busybox", Env: []corev1.EnvVar{{Name: "WHO", Value: "forged"}}}}}}
		if _, err := tenantB.CoreV1().Pods(tc.remoteNS).Create(ctx, forged, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		daemontest.WaitPod(t, tc.b.Client, tc.remoteNS, "forged", "Running in B", isRunning)
		resynced(t)
		now, err := tc.a.Client.CoreV1().Pods(tc.ns).Get(ctx, "good", metav1.GetOptions{})
		if err != nil || now.Status.PodIP != good.Status.PodIP || now.Status.PodIP != ours.Status.PodIP {
			t.Errorf("A's pod took status from the forged pod: %v, IP %s (was %s)", err, now.Status.PodIP, good.Status.PodIP)
		}
		// Logs and exec of A's pod reach the provider's pod, not the
		// forged one (the mock's log lines name the pod in B).
		out, err := tc.kubectl("", "logs", "good", "--tail=1")
		if err != nil || !strings.HasPrefix(out, ours.Namespace+"/"+ours.Name+"/app ") {
			t.Errorf("kubectl logs good: %v %q, want the lines of %s", err, out, ours.Name)
		}
		if out, err := tc.kubectl("", "exec", "good", "--", "printenv", "WHO"); err != nil || out != "ours\n" {
			t.Errorf("kubectl exec good -- printenv WHO: %v %q, want the provider's pod's \"ours\"", err, out)
		}
		// It is B's tenant's: the provider does not delete it.
		if _, err := tc.b.Client.CoreV1().Pods(tc.remoteNS).Get(ctx, "forged", metav1.GetOptions{}); err != nil {
			t.Errorf("the forged pod was deleted: %v", err)
		}
	})

	t.Run("harmless: B's pod specs choose nothing of A's", func(t *testing.T) {
		// A Secret of A's tenant no pod of A uses, the Secret the bait pods
		// use, and one only an ephemeral container of A's adds.
		victim, used, debug := testcluster.UniqueName("victim"), testcluster.UniqueName("used"), testcluster.UniqueName("debug")
		victimValue := testcluster.UniqueName("the-victims-value")
		for name, value := range map[string]string{victim: victimValue, used: "v0", debug: "debugging"} {
			if _, err := tenantA.CoreV1().Secrets(tc.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
				StringData: map[string]string{"value": value}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		copyName := func(name string) string { return "a." + tc.node.Name + "." + tc.ns + "." + name }
		// B's tenant's references are optional, so its containers run in B
		// until the copy appears.
		victimRef := corev1.LocalObjectReference{Name: copyName(victim)}
		stealEnv := corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: victimRef, Optional: ptr.To(true)}}
		for _, name := range []string{"bait-patched", "bait-recreated"} {
			p := compliant(name, tc.node.Name)
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "used", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: used}}})
			createAs(t, tenantA, p)
			// They use creds too, whose collection the next test awaits.
			t.Cleanup(func() { _ = tenantA.CoreV1().Pods(tc.ns).Delete(context.Background(), name, daemontest.DeleteNow) })
			daemontest.WaitPod(t, tc.a.Client, tc.ns, name, "Running", isRunning)
		}
		if _, err := tc.b.Client.CoreV1().Secrets(tc.remoteNS).Get(ctx, copyName(used), metav1.GetOptions{}); err != nil {
			t.Fatalf("the copy of %s, which A's bait pods use: %v", used, err)
		}

		// Attack 1: an ephemeral container added in B through its
		// subresource, its env from the victim's copy-to-be.
		patched := tc.remotePods(t)["bait-patched"][0]
		patched.Spec.EphemeralContainers = append(patched.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "steal", Image: "busybox", EnvFrom: []corev1.EnvFromSource{stealEnv}}})
		if _, err := tenantB.CoreV1().Pods(tc.remoteNS).UpdateEphemeralContainers(ctx, patched.Name, &patched, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("B's tenant patches ephemeralcontainers: %v", err)
		}

		// Attack 2: the pod deleted in B and made again with its signed
		// metadata and a spec of B's tenant's, which mounts the victim's
		// copy-to-be. The provider may make its own pod again first: then
		// B's tenant tries again.
		var recreated *corev1.Pod
		daemontest.Eventually(t, "B's tenant's pod in place of bait-recreated", func() (bool, string) {
			ours := tc.remotePods(t)["bait-recreated"]
			if len(ours) != 1 {
				return false, fmt.Sprintf("%d pods in B", len(ours))
			}
			forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: ours[0].Name, Labels: ours[0].Labels, Annotations: ours[0].Annotations,
				OwnerReferences: ours[0].OwnerReferences}, Spec: *ours[0].Spec.DeepCopy()}
			if _, stolen := forged.Labels["stolen"]; stolen {
				recreated = &ours[0]
				return true, ""
			}
			forged.Labels["stolen"] = "" // not signed, so the signature still holds
			forged.Spec.Volumes = append(forged.Spec.Volumes, corev1.Volume{Name: "steal", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: victimRef.Name, Optional: ptr.To(true)}}})
			forged.Spec.Containers[0].EnvFrom = append(forged.Spec.Containers[0].EnvFrom, stealEnv)
			if err := tenantB.CoreV1().Pods(tc.remoteNS).Delete(ctx, ours[0].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
				Preconditions: &metav1.Preconditions{UID: &ours[0].UID}}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				t.Fatal(err)
			}
			_, err := tenantB.CoreV1().Pods(tc.remoteNS).Create(ctx, forged, metav1.CreateOptions{})
			return false, fmt.Sprint("recreated: ", err)
		})
		// The provider takes it for its own: A's pod runs on, with its IP.
		daemontest.WaitPod(t, tc.a.Client, tc.ns, "bait-recreated", "Running on B's tenant's pod", func(p *corev1.Pod) bool {
			r := tc.remotePods(t)["bait-recreated"]
			return len(r) == 1 && r[0].UID == recreated.UID && isRunning(&r[0]) && isRunning(p) && p.Status.PodIP == r[0].Status.PodIP
		})

		// Three changes of the bait pods' Secret reach B, one after the
		// other: at least three rounds of resync and collection ran with
		// both attacks in place, and none copied the victim.
		for i := 1; i <= 3; i++ {
			value := fmt.Sprintf("v%d", i)
			secret, err := tenantA.CoreV1().Secrets(tc.ns).Get(ctx, used, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			secret.Data["value"] = []byte(value)
			if _, err := tenantA.CoreV1().Secrets(tc.ns).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			daemontest.Eventually(t, "the copy of "+used+" in B at "+value, func() (bool, string) {
				if _, err := tc.b.Client.CoreV1().Secrets(tc.remoteNS).Get(ctx, victimRef.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Fatalf("A's %s/%s was copied into B as %s for a pod spec of B's: %v", tc.ns, victim, victimRef.Name, err)
				}
				c, err := tc.b.Client.CoreV1().Secrets(tc.remoteNS).Get(ctx, copyName(used), metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				return string(c.Data["value"]) == value, string(c.Data["value"])
			})
		}

		// What A's pods use still crosses, the ephemeral containers of A's
		// included: an ephemeral container A's tenant adds to a bait pod
		// gets its Secret copied.
		bait, err := tenantA.CoreV1().Pods(tc.ns).Get(ctx, "bait-patched", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bait.Spec.EphemeralContainers = append(bait.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debug", Image: "busybox", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: debug}}}}}})
		if _, err := tenantA.CoreV1().Pods(tc.ns).UpdateEphemeralContainers(ctx, bait.Name, bait, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("A's tenant adds an ephemeral container: %v", err)
		}
		daemontest.Eventually(t, "the copy of "+debug+", which A's ephemeral container uses, in B", func() (bool, string) {
			_, err := tc.b.Client.CoreV1().Secrets(tc.remoteNS).Get(ctx, copyName(debug), metav1.GetOptions{})
			return err == nil, fmt.Sprint(err)
		})
		secrets, err := tc.b.Client.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets.Items {
			if string(s.Data["value"]) == victimValue {
				t.Errorf("A's %s/%s is in B as %s/%s", tc.ns, victim, s.Namespace, s.Name)
			}
		}
		// The attacks are still in place: they were tried, and failed.
		attacked := tc.remotePods(t)
		if p := attacked["bait-patched"]; len(p) != 1 || len(p[0].Spec.EphemeralContainers) != 1 {
			t.Errorf("bait-patched in B lost B's tenant's ephemeral container: %+v", p)
		}
		if p := attacked["bait-recreated"]; len(p) != 1 || p[0].UID != recreated.UID {
			t.Errorf("bait-recreated in B is no longer B's tenant's pod: %+v", p)
		}
		noJewelsInB(t)
	})

	t.Run("harmless: two nodes in one namespace of B", func(t *testing.T) {
		other := daemontest.Start(t, tc.a, tc.a.AddHost(t, testcluster.UniqueName("h")), "--provider", "kubernetes", "--provider-config", tc.config)
		daemontest.WaitNodeReady(t, tc.a.Client, other.Name)
		createAs(t, tenantA, compliant("other", other.Name))
		createAs(t, tenantA, compliant("short-lived", tc.node.Name))
		daemontest.WaitPod(t, tc.a.Client, tc.ns, "other", "Running", isRunning)
		daemontest.WaitPod(t, tc.a.Client, tc.ns, "short-lived", "Running", isRunning)
		otherCopy := "a." + other.Name + "." + tc.ns + ".creds"
		if _, err := tc.b.Client.CoreV1().Secrets(tc.remoteNS).Get(ctx, otherCopy, metav1.GetOptions{}); err != nil {
			t.Fatalf("the other node's copy %s: %v", otherCopy, err)
		}
		// This node's pods using creds go: its copy is collected, the
		// other node's stays.
		for _, name := range []string{"good", "short-lived"} {
			if err := tenantA.CoreV1().Pods(tc.ns).Delete(ctx, name, daemontest.DeleteNow); err != nil {
				t.Fatal(err)
			}
		}
		ourCopy := "a." + tc.node.Name + "." + tc.ns + ".creds"
		daemontest.Eventually(t, "this node's copy of creds collected", func() (bool, string) {
			_, err := tc.b.Client.CoreV1().Secrets(tc.remoteNS).Get(ctx, ourCopy, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		if _, err := tc.b.Client.CoreV1().Secrets(tc.remoteNS).Get(ctx, otherCopy, metav1.GetOptions{}); err != nil {
			t.Errorf("the other node's copy %s went with this node's: %v", otherCopy, err)
		}
		if p, err := tc.a.Client.CoreV1().Pods(tc.ns).Get(ctx, "other", metav1.GetOptions{}); err != nil || !isRunning(p) {
			t.Errorf("the other node's pod: %v %v", err, p.Status.Phase)
		}
		noJewelsInB(t)
	})
}
