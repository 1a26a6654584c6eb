package wire

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/node"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
)

// TestResizeRefusesGarbage: a malformed ResizePod request or answer is an
// error naming what is wrong.
func TestResizeRefusesGarbage(t *testing.T) {
	pod, err := Encode(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  *pb.ResizePodRequest
		want string
	}{
		{"no pod", &pb.ResizePodRequest{}, "pod: empty"},
		{"unnamed container", &pb.ResizePodRequest{Pod: pod, Containers: []*pb.ContainerResize{{}}}, "containers[0]: no name"},
		{"malformed resources", &pb.ResizePodRequest{Pod: pod, Containers: []*pb.ContainerResize{{Name: "app", Change: &pb.ResourcesChange{To: []byte{0xff, 0xff}}}}}, `container "app": malformed to`},
	} {
		if _, err := ResizeFromProto(tc.req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := ResultFromProto(&pb.ResizePodResponse{Outcome: 42}); err == nil || !strings.Contains(err.Error(), "unknown outcome") {
		t.Errorf("unknown outcome: %v", err)
	}
	if _, err := ResultToProto(node.ResizeResult{}); err == nil {
		t.Error("a result without an outcome crossed")
	}
}
