//go:build e2e

package node

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

// replySizes records the size of the reply to each request, by method and
// path.
type replySizes struct {
	next  http.RoundTripper
	mu    sync.Mutex
	sizes map[string][]int
}

func (r *replySizes) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.sizes[req.Method+" "+req.URL.Path] = append(r.sizes[req.Method+" "+req.URL.Path], len(body))
	r.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

func (r *replySizes) of(request string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sizes[request]
}

// TestPodWriterReadsMetadataOnly writes a status and deletes a pod on a real
// API server, as the controller does, and checks that the replies carry
// the pod's metadata only, while the writes do what the typed client's do.
func TestPodWriterReadsMetadataOnly(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()

	cfg := rest.CopyConfig(c.Config)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	sizes := &replySizes{sizes: map[string][]int{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { sizes.next = rt; return sizes })
	client := kubernetes.NewForConfigOrDie(cfg)
	w := newPodWriter(client.CoreV1())
	if w.rest == nil {
		t.Fatal("a real client's REST client was not used")
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "a"}},
		Spec: corev1.PodSpec{NodeName: "nowhere", Containers: []corev1.Container{{
			Name: "c", Image: "busybox", Command: []string{"sleep", "3600"}, Env: []corev1.EnvVar{{Name: "A", Value: strings.Repeat("x", 1000)}},
		}}},
	}
	created, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch, err := statusPatch(created.UID, &created.Status, &corev1.PodStatus{Phase: corev1.PodRunning, Message: "written"})
	if err != nil {
		t.Fatal(err)
	}
	rv, err := w.patchStatus(ctx, created, patch)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Client.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.PodRunning || got.Status.Message != "written" {
		t.Errorf("status written: %+v", got.Status)
	}
	if rv == "" || rv != got.ResourceVersion {
		t.Errorf("resource version %q, the pod has %q", rv, got.ResourceVersion)
	}

	// The UID precondition: a pod of the same name, not ours, stays.
	other := created.DeepCopy()
	other.UID = "not-this-pod"
	if err := w.remove(ctx, other); !apierrors.IsConflict(err) {
		t.Errorf("removing another pod of the name: %v, want a conflict", err)
	}
	if err := w.remove(ctx, created); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after remove: %v, want not found", err)
	}
	if err := w.remove(ctx, created); !apierrors.IsNotFound(err) {
		t.Errorf("removing it again: %v, want not found", err)
	}

	path := "/api/v1/namespaces/" + ns + "/pods"
	full, patched, deleted := sizes.of("POST "+path), sizes.of("PATCH "+path+"/p/status"), sizes.of("DELETE "+path+"/p")
	if len(full) != 1 || len(patched) != 1 || len(deleted) != 3 {
		t.Fatalf("replies recorded: %v", sizes.sizes)
	}
	if patched[0]*2 > full[0] || deleted[1]*2 > full[0] {
		t.Errorf("reply sizes: the created pod %d bytes, the status patch %d, the delete %d: want half or less", full[0], patched[0], deleted[1])
	}
}

// TestPodWriterWithFakeClient checks that a client without a REST client
// (client-go's fake) writes through the typed client.
func TestPodWriterWithFakeClient(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1", ResourceVersion: "5"}}
	client := fake.NewSimpleClientset(pod)
	w := newPodWriter(client.CoreV1())
	if w.rest != nil {
		t.Fatal("the fake's nil REST client was taken")
	}
	if _, err := w.patchStatus(context.Background(), pod, []byte(`{"status":{"phase":"Running"}}`)); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil || got.Status.Phase != corev1.PodRunning {
		t.Fatalf("status not written: %v %v", got, err)
	}
	if err := w.remove(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after remove: %v", err)
	}
}

// A reply is read for its resource version whether the API server sent the
// metadata or, unable to transform it, the whole pod, in protobuf or JSON;
// anything else is an error naming the reply.
func TestResourceVersionOfReply(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: "41"}}
	partial := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: "42"}}
	for _, mediaType := range []string{runtime.ContentTypeProtobuf, runtime.ContentTypeJSON} {
		info, ok := runtime.SerializerInfoForMediaType(replyCodecs.SupportedMediaTypes(), mediaType)
		if !ok {
			t.Fatalf("no serializer for %s", mediaType)
		}
		for obj, want := range map[runtime.Object]string{pod: "41", partial: "42"} {
			gv := corev1.SchemeGroupVersion
			if obj == partial {
				gv = metav1.SchemeGroupVersion
			}
			raw, err := runtime.Encode(replyCodecs.EncoderForVersion(info.Serializer, gv), obj)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := resourceVersionOf(raw); err != nil || got != want {
				t.Errorf("%s %T: got %q, %v; want %q", mediaType, obj, got, err, want)
			}
		}
	}
	if _, err := resourceVersionOf([]byte("<html>")); err == nil || !strings.Contains(err.Error(), "decoding the API server's reply") {
		t.Errorf("a reply that is no object: %v", err)
	}
}
