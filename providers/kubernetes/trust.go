package kubernetes

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// AnnotationSignature marks an object of B as made by this provider: an
// HMAC-SHA256, keyed by the config's signingKeyFile, of what the object
// claims to be (kind, cluster, node, its namespace and name in B, its
// source in A). B's users can read it but not make one for another claim
// without the key; a copy of it is only valid under the same name in the
// same namespace, which B gives one object at a time.
const AnnotationSignature = "virtual-kubelet.io/signature"

// signer makes and checks signatures for one node of one source cluster.
type signer struct {
	key     []byte
	cluster string
	node    string
}

// sum is the signature of the claim parts, each length-prefixed so no two
// claims share an input.
func (s signer) sum(parts ...string) string {
	mac := hmac.New(sha256.New, s.key)
	for _, p := range parts {
		mac.Write(binary.BigEndian.AppendUint32(nil, uint32(len(p))))
		mac.Write([]byte(p))
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func (s signer) valid(sig string, parts ...string) bool {
	return hmac.Equal([]byte(sig), []byte(s.sum(parts...)))
}

// podClaim is what a pod's signature covers.
func (s signer) podClaim(meta metav1.Object) []string {
	l, a := meta.GetLabels(), meta.GetAnnotations()
	return []string{"pod", s.cluster, s.node, meta.GetNamespace(), meta.GetName(),
		l[LabelNode], l[LabelSourceNamespace], a[AnnotationSourceName], l[LabelSourceUID]}
}

// signPod signs B's pod, whose back-links are set.
func (s signer) signPod(remote *corev1.Pod) {
	remote.Annotations[AnnotationSignature] = s.sum(s.podClaim(remote)...)
}

// sourceOf returns A's namespace, name and UID of a pod in B this node
// made, or ok false for any other pod: one without back-links, another
// node's, or one whose back-links do not match its signature (forged, or
// changed in B).
func (s signer) sourceOf(remote *corev1.Pod) (namespace, name string, uid types.UID, ok bool) {
	namespace = remote.Labels[LabelSourceNamespace]
	name = remote.Annotations[AnnotationSourceName]
	uid = types.UID(remote.Labels[LabelSourceUID])
	ok = namespace != "" && name != "" && uid != "" && remote.Labels[LabelNode] == s.node &&
		s.valid(remote.Annotations[AnnotationSignature], s.podClaim(remote)...)
	return namespace, name, uid, ok
}

// copyClaim is what the signature of a ConfigMap or Secret copy covers.
func (s signer) copyClaim(kind string, meta metav1.Object) []string {
	l, a := meta.GetLabels(), meta.GetAnnotations()
	return []string{kind, s.cluster, s.node, meta.GetNamespace(), meta.GetName(),
		l[LabelNode], l[LabelSourceNamespace], a[AnnotationSourceName]}
}

func (s signer) signCopy(kind string, meta *metav1.ObjectMeta) {
	meta.Annotations[AnnotationSignature] = s.sum(s.copyClaim(kind, meta)...)
}

// ownsCopy reports a copy of kind this node made.
func (s signer) ownsCopy(kind string, meta metav1.Object) bool {
	return meta.GetLabels()[LabelNode] == s.node && s.valid(meta.GetAnnotations()[AnnotationSignature], s.copyClaim(kind, meta)...)
}

// namespaceClaim is what a namespace's signature covers: not the node, so
// the nodes of one cluster sharing a key share the namespaces they make.
func (s signer) namespaceClaim(meta metav1.Object) []string {
	return []string{"namespace", s.cluster, meta.GetName(), meta.GetLabels()[LabelSourceNamespace]}
}

func (s signer) signNamespace(meta *metav1.ObjectMeta) {
	meta.Annotations[AnnotationSignature] = s.sum(s.namespaceClaim(meta)...)
}

// ownsNamespace reports a namespace a node of this cluster made.
func (s signer) ownsNamespace(meta metav1.Object) bool {
	return s.valid(meta.GetAnnotations()[AnnotationSignature], s.namespaceClaim(meta)...)
}
