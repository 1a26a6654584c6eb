package wire

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vkubelet/virtual-kubelet/node/volume"
)

// TestVolumesRoundTrip: files, sources and the refresh time arrive as
// sent; a token to request on read is refused, naming the file, rather
// than sent empty.
func TestVolumesRoundTrip(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1"}}
	sent := &volume.Contents{
		Volumes: []volume.Volume{{Name: "kube-api-access", Files: []volume.File{
			{Path: "namespace", Data: "ns", Mode: 0o644}, {Path: "token", Data: "a.b.c", Mode: 0o600}}}},
		RefreshAt: time.Unix(0, 1_700_000_000_123_456_789),
		Sources:   []string{"ConfigMap/kube-root-ca.crt"},
	}
	req, err := VolumesToProto(pod, sent)
	if err != nil {
		t.Fatal(err)
	}
	if got := VolumesFromProto(req); !reflect.DeepEqual(got, sent) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, sent)
	}

	onRead := volume.NewTokens(fake.NewClientset().CoreV1(), 0).OnRead(pod, "", 3600)
	sent.Volumes[0].Files[1] = volume.File{Path: "token", Mode: 0o600, Token: onRead}
	if _, err := VolumesToProto(pod, sent); err == nil || !strings.Contains(err.Error(), `volume "kube-api-access": file "token" is a token to request on read`) {
		t.Errorf("a token to request on read: %v, want it refused by name", err)
	}
}
