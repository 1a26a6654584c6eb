//go:build e2e

package node_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/nodeutil"
	"github.com/vkubelet/virtual-kubelet/node/volume"
)

// volumeProvider is a testProvider that records every SetPodVolumes call.
type volumeProvider struct {
	notifyingProvider
	mu         sync.Mutex
	deliveries map[string][]delivery
}

type delivery struct {
	at       time.Time
	contents *volume.Contents
	// beforeCreate is set if the provider did not run the pod yet.
	beforeCreate bool
}

var _ node.PodVolumeHandler = (*volumeProvider)(nil)

func (p *volumeProvider) SetPodVolumes(_ context.Context, pod *corev1.Pod, contents *volume.Contents) error {
	before := p.pod(pod.Namespace, pod.Name) == nil
	p.mu.Lock()
	defer p.mu.Unlock()
	k := key(pod.Namespace, pod.Name)
	p.deliveries[k] = append(p.deliveries[k], delivery{at: time.Now(), contents: contents, beforeCreate: before})
	return nil
}

func (p *volumeProvider) delivered(ns, name string) []delivery {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]delivery(nil), p.deliveries[key(ns, name)]...)
}

// file returns a file of the latest contents delivered for a pod.
func (p *volumeProvider) file(ns, pod, vol, path string) (volume.File, bool) {
	d := p.delivered(ns, pod)
	if len(d) == 0 {
		return volume.File{}, false
	}
	v := d[len(d)-1].contents.Volume(vol)
	if v == nil {
		return volume.File{}, false
	}
	return v.File(path)
}

func startVolumeNode(t *testing.T, c *testcluster.Cluster, tokenMaxAge time.Duration) (*volumeProvider, string) {
	p := &volumeProvider{notifyingProvider: notifyingProvider{newTestProvider()}, deliveries: map[string][]delivery{}}
	_, nodeName := startNode(t, c, p, func(cfg *nodeutil.Config) {
		base := cfg.ConfigurePodController
		cfg.ConfigurePodController = func(pc *node.PodControllerConfig) {
			base(pc)
			pc.ServiceAccountTokenMaxAge = tokenMaxAge
		}
	})
	return p, nodeName
}

// reviewToken checks a token with a TokenReview and returns who it is.
func reviewToken(t *testing.T, client kubernetes.Interface, token string, audiences ...string) *authenticationv1.TokenReviewStatus {
	t.Helper()
	tr, err := client.AuthenticationV1().TokenReviews().Create(context.Background(), &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &tr.Status
}

func TestVolumesAndBoundTokens(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	const tokenMaxAge = 3 * time.Second
	p, nodeName := startVolumeNode(t, c, tokenMaxAge)

	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data: map[string]string{"mode": "fast", "level": "3"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		StringData: map[string]string{"password": "s3cret"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := newPod(ns, nodeName, "web")
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"},
			Items:                []corev1.KeyToPath{{Key: "mode", Path: "conf/mode", Mode: ptr.To[int32](0o600)}}}}},
		{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds", DefaultMode: ptr.To[int32](0o400)}}},
		{Name: "extra", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "not-there"}, Optional: ptr.To(true)}}},
		{Name: "vault", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "vault", ExpirationSeconds: ptr.To[int64](600), Path: "token"}}}}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	created, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitPod(t, c.Client, ns, "web", "Running", phaseIs(corev1.PodRunning))

	first := p.delivered(ns, "web")
	if len(first) == 0 || !first[0].beforeCreate {
		t.Fatal("the volumes were not handed over before CreatePod")
	}
	for _, tc := range []struct{ vol, path, data string }{
		{"settings", "conf/mode", "fast 0600"}, {"creds", "password", "s3cret 0400"},
	} {
		f, ok := p.file(ns, "web", tc.vol, tc.path)
		if got := fmt.Sprintf("%s %#o", f.Data, f.Mode); !ok || got != tc.data {
			t.Errorf("%s/%s: %q %v, want %q", tc.vol, tc.path, got, ok, tc.data)
		}
	}
	if v := first[0].contents.Volume("extra"); v == nil || len(v.Files) != 0 {
		t.Errorf("the optional missing ConfigMap must be an empty volume: %+v", v)
	}
	if first[0].contents.Volume("scratch") != nil {
		t.Error("emptyDir is the provider's, not resolved")
	}

	// The API server's admission added the default kube-api-access volume.
	var access string
	for _, v := range created.Spec.Volumes {
		if strings.HasPrefix(v.Name, "kube-api-access-") {
			access = v.Name
		}
	}
	if access == "" {
		t.Fatal("no kube-api-access volume in the pod")
	}
	tok, _ := p.file(ns, "web", access, "token")
	who := reviewToken(t, c.Client, string(tok.Data))
	if !who.Authenticated || who.User.Username != "system:serviceaccount:"+ns+":default" ||
		fmt.Sprint(who.User.Extra["authentication.kubernetes.io/pod-name"]) != "[web]" ||
		fmt.Sprint(who.User.Extra["authentication.kubernetes.io/pod-uid"]) != fmt.Sprintf("[%s]", created.UID) {
		t.Errorf("the token is not the default service account's bound to the pod: %+v", who)
	}
	rootCA, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := p.file(ns, "web", access, "ca.crt"); string(f.Data) != rootCA.Data["ca.crt"] {
		t.Error("ca.crt is not the kube-root-ca.crt ConfigMap's")
	}
	if f, _ := p.file(ns, "web", access, "namespace"); string(f.Data) != ns {
		t.Errorf("namespace file %q", f.Data)
	}
	vaultTok, _ := p.file(ns, "web", "vault", "token")
	if who := reviewToken(t, c.Client, string(vaultTok.Data), "vault"); !who.Authenticated || len(who.Audiences) != 1 || who.Audiences[0] != "vault" {
		t.Errorf("the vault token is not for its audience: %+v", who)
	}

	// The tokens are renewed at the maximum age (3s here, 24h by default);
	// the new ones are valid too.
	var renewedAt time.Time
	eventually(t, "token renewed", func() (bool, string) {
		f, _ := p.file(ns, "web", "vault", "token")
		d := p.delivered(ns, "web")
		renewedAt = d[len(d)-1].at
		return string(f.Data) != string(vaultTok.Data), fmt.Sprint(len(d), " deliveries")
	})
	t.Logf("token renewed %s after the first delivery (maximum age %s)", renewedAt.Sub(first[0].at).Round(time.Millisecond), tokenMaxAge)
	if took := renewedAt.Sub(first[0].at); took < tokenMaxAge-time.Second {
		t.Errorf("token renewed after %s, before its maximum age %s", took, tokenMaxAge)
	}
	renewed, _ := p.file(ns, "web", "vault", "token")
	if who := reviewToken(t, c.Client, string(renewed.Data), "vault"); !who.Authenticated {
		t.Errorf("the renewed token is not valid: %+v", who)
	}

	// A ConfigMap change reaches the provider.
	changed := time.Now()
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data: map[string]string{"mode": "slow", "level": "3"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ConfigMap update delivered", func() (bool, string) {
		f, _ := p.file(ns, "web", "settings", "conf/mode")
		return string(f.Data) == "slow", string(f.Data)
	})
	t.Logf("ConfigMap update delivered %s after the change", time.Since(changed).Round(time.Millisecond))

	// Deleting the pod forgets its volumes; a pod without automounting has
	// no token volume at all.
	plain := newPod(ns, nodeName, "plain")
	plain.Spec.AutomountServiceAccountToken = ptr.To(false)
	created, err = c.Client.CoreV1().Pods(ns).Create(ctx, plain, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(created.Spec.Volumes) != 0 {
		t.Errorf("automountServiceAccountToken: false, yet volumes %v", created.Spec.Volumes)
	}
	waitPod(t, c.Client, ns, "plain", "Running", phaseIs(corev1.PodRunning))
	if d := p.delivered(ns, "plain"); len(d) != 1 || len(d[0].contents.Volumes) != 0 {
		t.Errorf("a pod without volumes got %+v", d)
	}
}

func TestMissingVolumeSourceKeepsPodPending(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	p, nodeName := startVolumeNode(t, c, 0)

	pod := newPod(ns, nodeName, "waiting")
	pod.Spec.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "later"}}}}}}}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pending := waitPod(t, c.Client, ns, "waiting", "waiting with CreateContainerConfigError", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return p.Status.Phase == corev1.PodPending && len(cs) == 1 && cs[0].State.Waiting != nil &&
			cs[0].State.Waiting.Reason == node.ReasonCreateContainerConfigError
	})
	if msg := pending.Status.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg, `volume "creds": secret "later" not found`) {
		t.Errorf("waiting message %q does not name the volume and Secret", msg)
	}
	waitEvent(t, c.Client, ns, "waiting", node.ReasonFailed, `secret "later" not found`)
	if p.pod(ns, "waiting") != nil {
		t.Fatal("a pod with a missing mandatory Secret reached the provider")
	}

	if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "later"},
		StringData: map[string]string{"key": "value"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c.Client, ns, "waiting", "Running once its Secret exists", phaseIs(corev1.PodRunning))
	if f, ok := p.file(ns, "waiting", "creds", "key"); !ok || string(f.Data) != "value" {
		t.Errorf("secret file: %q %v", f.Data, ok)
	}
}

// waitEvent waits for a warning Event on the named object with reason and
// a message containing text.
func waitEvent(t *testing.T, client kubernetes.Interface, ns, name, reason, text string) {
	t.Helper()
	eventually(t, "warning event "+reason, func() (bool, string) {
		evs, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == reason && strings.Contains(e.Message, text) {
				return true, ""
			}
		}
		return false, fmt.Sprint(len(evs.Items), " events")
	})
}
