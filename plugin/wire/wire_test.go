package wire

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// TestErrorKindsRoundTrip: the errdefs kinds a plugin returns are the kinds
// the daemon sees, message kept; other errors stay errors of neither kind.
func TestErrorKindsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		err      error
		code     codes.Code
		notFound bool
		invalid  bool
	}{
		{errdefs.NotFoundf("pod ns/a not found"), codes.NotFound, true, false},
		{fmt.Errorf("wrapped: %w", errdefs.InvalidInput("bad annotation")), codes.InvalidArgument, false, true},
		{errors.New("backend down"), codes.Unknown, false, false},
		{context.DeadlineExceeded, codes.DeadlineExceeded, false, false},
	} {
		sent := ToStatus(tc.err)
		if got := status.Code(sent); got != tc.code {
			t.Errorf("%v: code %s, want %s", tc.err, got, tc.code)
		}
		back := FromStatus("Call", sent)
		if errdefs.IsNotFound(back) != tc.notFound || errdefs.IsInvalidInput(back) != tc.invalid {
			t.Errorf("%v: back as %v (NotFound %v, InvalidInput %v)", tc.err, back, errdefs.IsNotFound(back), errdefs.IsInvalidInput(back))
		}
		if !strings.Contains(back.Error(), tc.err.Error()) {
			t.Errorf("%v: message lost: %v", tc.err, back)
		}
	}
	if ToStatus(nil) != nil || FromStatus("Call", nil) != nil {
		t.Error("nil is not nil after the round trip")
	}
	if err := FromStatus("Ping", status.Error(codes.Unavailable, "connection refused")); !strings.Contains(err.Error(), "plugin unavailable: Ping: connection refused") {
		t.Errorf("unavailable: %v", err)
	}
}

// TestDecodeRefusesGarbage: bytes that are not what they claim give errors
// naming the call and the problem.
func TestDecodeRefusesGarbage(t *testing.T) {
	good, err := Encode(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	if err != nil {
		t.Fatal(err)
	}
	if pod, err := DecodePod("GetPod answer", good); err != nil || pod.Name != "a" {
		t.Fatalf("a good pod: %v %v", pod, err)
	}
	if _, err := Encode[corev1.Pod]((*corev1.Pod)(nil)); err == nil {
		t.Error("encoding a nil pod: no error")
	}
	unnamed, _ := Encode(&corev1.Pod{})
	badPhase, _ := Encode(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.PodStatus{Phase: "Exploded"}})
	for want, data := range map[string][]byte{
		"X: empty":             nil,
		"X: malformed *v1.Pod": {0xff, 0xff, 0xff},
		"X: malformed *v1.Pod in the Kubernetes protobuf encoding (3 bytes)": good[:3],
		"X: pod without a name":               unnamed,
		`X: pod /a: unknown phase "Exploded"`: badPhase,
	} {
		if _, err := DecodePod("X", data); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error with %q", err, want)
		}
	}
}

func TestResources(t *testing.T) {
	in := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}
	out, err := DecodeResources("event", EncodeResources(in))
	if err != nil || len(out) != 2 || !out.Cpu().Equal(*in.Cpu()) || !out.Memory().Equal(*in.Memory()) {
		t.Errorf("round trip: %v %v", out, err)
	}
	_, err = DecodeResources("WatchCapacity event", map[string]string{"cpu": "four"})
	if err == nil || !strings.Contains(err.Error(), `WatchCapacity event: resource "cpu": malformed quantity "four"`) {
		t.Errorf("a malformed quantity must be named: %v", err)
	}
}
