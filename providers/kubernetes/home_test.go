package kubernetes

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/volume"
)

// tokenPod is a pod of A with the kube-api-access volume the ServiceAccount
// admission adds, mounted, and A's service link variables in its env.
func tokenPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "caller", UID: "uid-caller"}, Spec: corev1.PodSpec{
		ServiceAccountName: "robot",
		Containers: []corev1.Container{{Name: "c", Image: "i",
			Env:          []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: "10.0.0.1"}, {Name: "KUBERNETES_PORT_443_TCP", Value: "tcp://10.0.0.1:443"}, {Name: "MINE", Value: "x"}},
			VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-x", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}}},
		Volumes: []corev1.Volume{{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To[int32](0o644),
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
					Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			}}}}},
	}}
}

// tokenContents are the resolved volumes of tokenPod with token tok.
func tokenContents(tok string, refresh time.Time) *volume.Contents {
	return &volume.Contents{RefreshAt: refresh, Volumes: []volume.Volume{{Name: "kube-api-access-x", Files: []volume.File{
		{Path: "ca.crt", Data: "A's CA", Mode: 0o644}, {Path: "token", Data: tok, Mode: 0o644}}}}}
}

func homeProvider(t *testing.T) (*Provider, func() *corev1.Secret) {
	t.Helper()
	p, client, localPods := objectsProvider(t, Config{Home: HomeConfig{APIServer: "https://a.example:6443"}})
	if err := p.pods.AddIndexers(cache.Indexers{sourceIndex: p.indexBySource}); err != nil {
		t.Fatal(err)
	}
	var err error
	if p.home, err = newHomeIdentity(p, corev1listers.NewSecretLister(newIndexer(t))); err != nil {
		t.Fatal(err)
	}
	if err := localPods.Add(tokenPod()); err != nil {
		t.Fatal(err)
	}
	secret := func() *corev1.Secret {
		s, err := client.CoreV1().Secrets("from-a").Get(context.Background(), p.tokenSecretName(tokenPod()), metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return s
	}
	return p, secret
}

// TestHomeIdentity: the pod's token volume becomes in B a secret volume
// of its token Secret at the same mount, with the same files; the Secret
// is written once B's pod exists, owned by it, and rewritten when the
// pod controller renews the token; A's service link variables give way to
// A's API server from the config.
func TestHomeIdentity(t *testing.T) {
	ctx := context.Background()
	p, secret := homeProvider(t)
	pod := tokenPod()
	if !p.Declares(node.CapabilityVolumes) || !p.Declares(node.CapabilityExec) {
		t.Fatal("with home, the provider declares volumes and its other capabilities")
	}

	if _, err := p.remotePod(pod); err == nil {
		t.Fatal("B's pod made before the tokens were resolved")
	}
	renew := time.Now().Add(48 * time.Minute)
	if err := p.SetPodVolumes(ctx, pod, tokenContents("token-1", renew)); err != nil {
		t.Fatal(err)
	}
	if secret() != nil {
		t.Fatal("the token Secret was written before B's pod exists")
	}
	remote, err := p.remotePod(pod)
	if err != nil {
		t.Fatal(err)
	}
	v := remote.Spec.Volumes[len(remote.Spec.Volumes)-1]
	if v.Name != "kube-api-access-x" || v.Secret == nil || v.Secret.SecretName != p.tokenSecretName(pod) || len(v.Secret.Items) != 2 ||
		v.Secret.Items[1].Path != "token" || *v.Secret.Items[1].Mode != 0o644 {
		t.Fatalf("B's token volume: %+v", v)
	}
	c := remote.Spec.Containers[0]
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].Name != "kube-api-access-x" {
		t.Errorf("B's mounts: %+v", c.VolumeMounts)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["KUBERNETES_SERVICE_HOST"] != "a.example" || env["KUBERNETES_SERVICE_PORT"] != "6443" || env["MINE"] != "x" || env["KUBERNETES_PORT_443_TCP"] != "" {
		t.Errorf("B's env: %v", env)
	}
	if remote.Spec.ServiceAccountName != "" || *remote.Spec.AutomountServiceAccountToken {
		t.Errorf("B's pod mounts a service account of B's")
	}

	remote.UID = "uid-in-b"
	if err := p.pods.GetStore().Add(remote); err != nil {
		t.Fatal(err)
	}
	if err := p.home.write(ctx, pod, remote); err != nil {
		t.Fatal(err)
	}
	s := secret()
	if s == nil || string(s.Data["kube-api-access-x.1"]) != "token-1" || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != "uid-in-b" ||
		s.Annotations[AnnotationRenewAt] != renew.UTC().Format(time.RFC3339) || !p.trust.ownsCopy(kindToken, s) {
		t.Fatalf("the token Secret: %+v", s)
	}

	// The controller renews the token at 80% of its life (node/volume):
	// the Secret follows.
	if err := p.SetPodVolumes(ctx, pod, tokenContents("token-2", renew.Add(48*time.Minute))); err != nil {
		t.Fatal(err)
	}
	if s := secret(); s == nil || string(s.Data["kube-api-access-x.1"]) != "token-2" {
		t.Fatalf("the renewed token is not in B: %+v", s)
	}
	if err := p.DeletePod(ctx, pod); err == nil || !errdefs.IsNotFound(err) {
		// The fake B has no such pod; what matters is the files are gone.
		t.Logf("DeletePod: %v", err)
	}
	if _, ok := p.home.files(pod.UID); ok {
		t.Error("the pod's token files are kept after DeletePod")
	}
}

// TestHomeIdentityNotOurs: a Secret of B's users under the token Secret's
// name is neither used nor changed.
func TestHomeIdentityNotOurs(t *testing.T) {
	ctx := context.Background()
	p, secret := homeProvider(t)
	pod := tokenPod()
	planted := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "from-a", Name: p.tokenSecretName(pod),
		Labels: map[string]string{LabelNode: "vk-b"}}, Data: map[string][]byte{"kube-api-access-x.1": []byte("planted")}}
	if _, err := p.remote.CoreV1().Secrets("from-a").Create(ctx, planted, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := p.SetPodVolumes(ctx, pod, tokenContents("token-1", time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	remote, err := p.remotePod(pod)
	if err != nil {
		t.Fatal(err)
	}
	remote.UID = "uid-in-b"
	err = p.home.write(ctx, pod, remote)
	if !errdefs.IsInvalidInput(err) {
		t.Fatalf("writing over B's Secret: %v", err)
	}
	if s := secret(); string(s.Data["kube-api-access-x.1"]) != "planted" {
		t.Errorf("B's Secret was changed: %v", s.Data)
	}
}

// TestHomeIdentityBounded: past the node's bounds the token Secret is not
// written.
func TestHomeIdentityBounded(t *testing.T) {
	ctx := context.Background()
	p, secret := homeProvider(t)
	p.budget = newReflectionBudget(1, 1<<20)
	if err := p.budget.reserve("configmap/from-a/other", 10); err != nil {
		t.Fatal(err)
	}
	pod := tokenPod()
	if err := p.SetPodVolumes(ctx, pod, tokenContents("token-1", time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	remote, err := p.remotePod(pod)
	if err != nil {
		t.Fatal(err)
	}
	remote.UID = k8stypes.UID("uid-in-b")
	if err := p.home.write(ctx, pod, remote); !errors.Is(err, errReflectionLimit) {
		t.Fatalf("writing past the bounds: %v", err)
	}
	if secret() != nil {
		t.Error("the token Secret was written past the bounds")
	}
}

// TestNoHome: without home the token volume does not cross and the
// provider does not declare volumes, so no token is requested.
func TestNoHome(t *testing.T) {
	p := testProvider(t, Config{})
	if p.Declares(node.CapabilityVolumes) {
		t.Error("volumes declared without home")
	}
	remote, err := p.remotePod(tokenPod())
	if err != nil {
		t.Fatal(err)
	}
	if len(remote.Spec.Volumes) != 0 || len(remote.Spec.Containers[0].VolumeMounts) != 0 {
		t.Errorf("the token volume crossed: %+v", remote.Spec.Volumes)
	}
}

// TestHomeIdentityPrune: a token Secret of this node left without an owner
// (B refused the pod, or the daemon stopped between CreatePod's writes) is
// deleted once copyGrace has passed; a young one, or one of B's users, is
// not.
func TestHomeIdentityPrune(t *testing.T) {
	ctx := context.Background()
	p, secret := homeProvider(t)
	pod := tokenPod()
	if err := p.SetPodVolumes(ctx, pod, tokenContents("token-1", time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := p.home.write(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	left := secret()
	if left == nil || len(left.OwnerReferences) != 0 {
		t.Fatalf("the Secret written before B's pod: %+v", left)
	}
	young := left.DeepCopy()
	young.Name, young.UID = "young", "uid-young"
	young.CreationTimestamp = metav1.Now()
	p.trust.signCopy(kindToken, &young.ObjectMeta)
	if _, err := p.remote.CoreV1().Secrets("from-a").Create(ctx, young, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	left.CreationTimestamp = metav1.NewTime(time.Now().Add(-copyGrace))
	left.UID = "uid-left"
	theirs := left.DeepCopy()
	theirs.Name, theirs.Annotations = "theirs", map[string]string{}
	if _, err := p.remote.CoreV1().Secrets("from-a").Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.home.secrets = corev1listers.NewSecretLister(newIndexer(t, left, young, theirs))
	if err := p.remote.CoreV1().Secrets("from-a").Delete(ctx, left.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.remote.CoreV1().Secrets("from-a").Create(ctx, left, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.home.prune(ctx)
	if secret() != nil {
		t.Error("the Secret left without an owner is still in B")
	}
	for _, name := range []string{"young", "theirs"} {
		if _, err := p.remote.CoreV1().Secrets("from-a").Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
