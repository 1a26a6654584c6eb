package node

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// podWriter makes the controller's writes of pod objects: status patches
// and the final delete. The controller needs only the new resource version
// of a written status, and nothing of a deleted pod, so when the pod client
// is a real one the API server is asked to answer with the object's
// metadata (PartialObjectMetadata) instead of the whole pod: it encodes,
// and the daemon reads and decodes, a third of the bytes or less on the two
// requests every pod's deletion makes.
type podWriter struct {
	pods corev1client.PodsGetter
	// rest is the pod client's REST client, nil when it has none (a fake):
	// then the typed client writes and its replies are decoded in full.
	rest rest.Interface
}

// metadataOnly asks for an object's metadata in the reply, in protobuf or
// JSON, or the object itself from a server that cannot transform it.
const metadataOnly = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1," +
	"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

// replyCodecs know either reply: the metadata, or the whole pod.
var replyCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(metav1.AddMetaToScheme(s))
	return serializer.NewCodecFactory(s)
}()

// newPodWriter writes through pods, and through its REST client when it
// has a real one.
func newPodWriter(pods corev1client.PodsGetter) podWriter {
	w := podWriter{pods: pods}
	if c, ok := pods.(interface{ RESTClient() rest.Interface }); ok {
		if rc, ok := c.RESTClient().(*rest.RESTClient); ok && rc != nil {
			w.rest = rc
		}
	}
	return w
}

// patchStatus applies a strategic merge patch to the pod's status and
// returns the resource version the API server gave the result.
func (w podWriter) patchStatus(ctx context.Context, pod *corev1.Pod, patch []byte) (resourceVersion string, err error) {
	if w.rest == nil {
		updated, err := w.pods.Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		if err != nil {
			return "", err
		}
		return updated.ResourceVersion, nil
	}
	raw, err := w.rest.Patch(types.StrategicMergePatchType).
		Namespace(pod.Namespace).Resource("pods").Name(pod.Name).SubResource("status").
		SetHeader("Accept", metadataOnly).Body(patch).Do(ctx).Raw()
	if err != nil {
		return "", err
	}
	return resourceVersionOf(raw)
}

// resourceVersionOf reads the resource version from a reply, the object's
// metadata or the object.
func resourceVersionOf(reply []byte) (string, error) {
	obj, err := runtime.Decode(replyCodecs.UniversalDeserializer(), reply)
	if err != nil {
		return "", fmt.Errorf("decoding the API server's reply: %w", err)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", fmt.Errorf("the API server's reply: %w", err)
	}
	return m.GetResourceVersion(), nil
}

// remove deletes the pod object at once (grace period 0), and only this
// pod (UID precondition), as the kubelet finishes a deletion.
func (w podWriter) remove(ctx context.Context, pod *corev1.Pod) error {
	opts := metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	}
	if w.rest == nil {
		return w.pods.Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
	}
	return w.rest.Delete().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).
		SetHeader("Accept", metadataOnly).Body(&opts).Do(ctx).Error()
}
