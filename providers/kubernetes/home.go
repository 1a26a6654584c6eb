package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1listers "k8s.io/client-go/listers/core/v1"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/volume"
)

// kindToken is the kind of the signature of a token Secret.
const kindToken = "token"

// AnnotationRenewAt is, on a token Secret in B, when the provider renews
// the tokens in it (RFC 3339): at 80% of their lifetime, as the kubelet
// does.
const AnnotationRenewAt = "virtual-kubelet.io/renew-at"

// homeIdentity gives offloaded pods their identity in A: the files of the
// pod's service-account token volumes as A's kubelet would write them (a
// token from A's TokenRequest API for the pod's own service account,
// audience and expiry, bound to A's pod; A's CA; A's namespace), which the
// pod controller resolves and renews (PodVolumeHandler, node/volume), held
// in B in a Secret owned by B's pod, so that it goes with the pod, and
// rewritten on each renewal. The Secret replaces the token volume in B's
// pod spec, at the same mount paths.
type homeIdentity struct {
	p          *Provider
	host, port string
	secrets    corev1listers.SecretLister // B's, this node's

	mu sync.Mutex
	// byPod holds the files of each pod of A (by UID) SetPodVolumes
	// delivered: the data of its token Secret.
	byPod map[types.UID]tokenFiles
}

// tokenFiles are the Secret data and the items that place it in the pod.
type tokenFiles struct {
	data    map[string][]byte
	items   map[string][]corev1.KeyToPath // by volume name
	renewAt time.Time
}

func newHomeIdentity(p *Provider, secrets corev1listers.SecretLister) (*homeIdentity, error) {
	host, port, err := p.cfg.Home.hostPort()
	if err != nil {
		return nil, fmt.Errorf("home.apiServer: %w", err)
	}
	return &homeIdentity{p: p, host: host, port: port, secrets: secrets, byPod: map[types.UID]tokenFiles{}}, nil
}

// Declares implements node.CapabilityDeclarer: the volumes capability,
// which has the pod controller request and renew the pods' tokens in A,
// only when the config sets home; every other capability the provider has.
func (p *Provider) Declares(c node.Capability) bool {
	return c != node.CapabilityVolumes || p.home != nil
}

// SetPodVolumes implements node.PodVolumeHandler: of the pod's resolved
// volumes, it keeps the service-account token volumes' files and writes
// them into B once B's pod exists (CreatePod writes them then); the other
// volumes reach B as copies of their ConfigMaps and Secrets.
func (p *Provider) SetPodVolumes(ctx context.Context, pod *corev1.Pod, contents *volume.Contents) error {
	h := p.home
	if h == nil {
		return nil
	}
	files := tokenFiles{data: map[string][]byte{}, items: map[string][]corev1.KeyToPath{}, renewAt: contents.RefreshAt}
	for _, v := range pod.Spec.Volumes {
		if !isServiceAccountToken(v) {
			continue
		}
		resolved := contents.Volume(v.Name)
		if resolved == nil {
			return fmt.Errorf("volume %q: not resolved", v.Name)
		}
		for i, f := range resolved.Files {
			key := fmt.Sprintf("%s.%d", v.Name, i)
			files.data[key] = []byte(f.Data)
			files.items[v.Name] = append(files.items[v.Name], corev1.KeyToPath{Key: key, Path: f.Path, Mode: &f.Mode})
		}
	}
	if len(files.data) == 0 {
		h.forget(pod.UID)
		return nil
	}
	h.mu.Lock()
	h.byPod[pod.UID] = files
	h.mu.Unlock()
	remote, err := p.remoteFor(pod.Namespace, pod.Name)
	if err != nil {
		return nil // CreatePod writes the Secret
	}
	if _, _, uid, _ := p.trust.sourceOf(remote); uid != pod.UID {
		return nil
	}
	return h.write(ctx, pod, remote)
}

// files returns the token files of A's pod.
func (h *homeIdentity) files(uid types.UID) (tokenFiles, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, ok := h.byPod[uid]
	return f, ok
}

// forget drops what is kept of A's pod; B's garbage collector deletes
// its Secret with B's pod.
func (h *homeIdentity) forget(uid types.UID) {
	h.mu.Lock()
	delete(h.byPod, uid)
	h.mu.Unlock()
	h.p.budget.release(tokenBudgetKey(uid))
}

// tokenBudgetKey counts the token Secret of A's pod uid in the budget.
func tokenBudgetKey(uid types.UID) string { return kindToken + "/" + string(uid) }

// tokenSecretName is the name in B of the token Secret of A's pod: it has
// no dot, so it is never the name of a copy (tokenSecretName's parts are
// joined by dashes, a copy's by dots).
func (p *Provider) tokenSecretName(pod *corev1.Pod) string {
	return p.cfg.SourceCluster + "-" + p.nodeName + "-token-" + string(pod.UID)
}

// tokenVolumes turns A's token volumes, taken out of B's pod spec, into
// secret volumes of the pod's token Secret with the same files. It fails
// until SetPodVolumes has delivered the files (the pod controller
// delivers them before CreatePod).
func (h *homeIdentity) tokenVolumes(pod *corev1.Pod, volumes []corev1.Volume) error {
	files, ok := h.files(pod.UID)
	for i, v := range volumes {
		items, resolved := files.items[v.Name]
		if !ok || !resolved {
			return fmt.Errorf("volume %q: the service-account token is not resolved yet", v.Name)
		}
		volumes[i].VolumeSource = corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  h.p.tokenSecretName(pod),
			Items:       items,
			DefaultMode: v.Projected.DefaultMode,
		}}
	}
	return nil
}

// homeEnv points the containers' in-cluster clients at A's API server:
// KUBERNETES_SERVICE_HOST and _PORT (and _PORT_HTTPS, as the service's
// port is named) are the config's, and the link variables of A's
// kubernetes Service (KUBERNETES_PORT*), which name its address in A, go.
func (h *homeIdentity) homeEnv(spec *corev1.PodSpec) {
	forEachContainer(spec, func(c *corev1.Container) {
		env := c.Env[:0:0]
		for _, e := range c.Env {
			switch {
			case strings.HasPrefix(e.Name, "KUBERNETES_PORT"), e.Name == "KUBERNETES_SERVICE_HOST", strings.HasPrefix(e.Name, "KUBERNETES_SERVICE_PORT"):
				continue
			}
			env = append(env, e)
		}
		c.Env = append(env,
			corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: h.host},
			corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: h.port},
			corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT_HTTPS", Value: h.port})
	})
}

// write makes the token Secret of A's pod in B equal to its files, owned
// by remote, B's pod: B's garbage collector deletes it with the pod.
// CreatePod writes it first with remote nil, in B's namespace of the pod,
// so that B's kubelet finds it when the pod arrives, then owned; a Secret
// left without an owner (B refused the pod, the daemon stopped) is deleted
// by prune.
func (h *homeIdentity) write(ctx context.Context, pod *corev1.Pod, remote *corev1.Pod) error {
	files, ok := h.files(pod.UID)
	if !ok {
		return nil
	}
	p := h.p
	namespace, err := p.names.remoteNamespace(pod.Namespace)
	if err != nil {
		return err
	}
	var owners []metav1.OwnerReference
	if remote != nil {
		owners = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: remote.Name, UID: remote.UID}}
	}
	want := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      p.tokenSecretName(pod),
			Labels:    map[string]string{LabelNode: p.nodeName, LabelSourceNamespace: pod.Namespace, LabelSourceUID: string(pod.UID)},
			Annotations: map[string]string{
				AnnotationSourceName: pod.Name,
				AnnotationRenewAt:    files.renewAt.UTC().Format(time.RFC3339),
			},
			OwnerReferences: owners,
		},
		Type: corev1.SecretTypeOpaque,
		Data: files.data,
	}
	p.trust.signCopy(kindToken, &want.ObjectMeta)
	if err := p.budget.reserve(tokenBudgetKey(pod.UID), want.Size()); err != nil {
		p.limitEvent(pod, err)
		return err
	}
	client := p.remote.CoreV1().Secrets(want.Namespace)
	have, err := h.secrets.Secrets(want.Namespace).Get(want.Name)
	if apierrors.IsNotFound(err) {
		_, err = client.Create(ctx, want, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return h.written(err, want)
		}
		have, err = client.Get(ctx, want.Name, metav1.GetOptions{})
	}
	if err != nil {
		return h.written(err, want)
	}
	if !p.trust.ownsCopy(kindToken, have) {
		return errdefs.InvalidInputf("secret %s/%s exists in the remote cluster and was not made by node %s: the pod's token is not written", have.Namespace, have.Name, p.nodeName)
	}
	if remote == nil {
		want.OwnerReferences = have.OwnerReferences
	}
	if maps.EqualFunc(have.Data, want.Data, func(a, b []byte) bool { return string(a) == string(b) }) &&
		apiequality.Semantic.DeepEqual(have.OwnerReferences, want.OwnerReferences) {
		return nil
	}
	want.ResourceVersion = have.ResourceVersion
	_, err = client.Update(ctx, want, metav1.UpdateOptions{})
	return h.written(err, want)
}

func (h *homeIdentity) written(err error, s *corev1.Secret) error {
	if err != nil {
		return fmt.Errorf("writing the token Secret %s/%s in the remote cluster: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// prune drops the files of the pods A no longer has, and deletes the
// token Secrets of this node left without an owner for copyGrace whose
// pod is not in B: B refused the pod, or the daemon stopped between the
// two writes of CreatePod.
func (h *homeIdentity) prune(ctx context.Context) {
	pods, err := h.p.local.Pods.List(labels.Everything())
	if err != nil {
		return
	}
	live := make(map[types.UID]bool, len(pods))
	for _, pod := range pods {
		live[pod.UID] = true
	}
	h.mu.Lock()
	var gone []types.UID
	for uid := range h.byPod {
		if !live[uid] {
			gone = append(gone, uid)
		}
	}
	h.mu.Unlock()
	for _, uid := range gone {
		h.forget(uid)
	}
	secrets, _ := h.secrets.List(labels.Everything())
	for _, s := range secrets {
		if len(s.OwnerReferences) > 0 || time.Since(s.CreationTimestamp.Time) < copyGrace || !h.p.trust.ownsCopy(kindToken, s) {
			continue
		}
		uid := types.UID(s.Labels[LabelSourceUID])
		if remote, err := h.p.remoteFor(s.Labels[LabelSourceNamespace], s.Annotations[AnnotationSourceName]); err == nil {
			if _, _, source, _ := h.p.trust.sourceOf(remote); source == uid {
				continue // CreatePod is about to own it
			}
		}
		secretUID := s.UID
		err := h.p.remote.CoreV1().Secrets(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &secretUID}})
		if err != nil && !apierrors.IsNotFound(err) {
			log.G(ctx).WithError(err).WithField("secret", s.Namespace+"/"+s.Name).Warn("kubernetes: deleting a token Secret without its pod")
		}
	}
}
