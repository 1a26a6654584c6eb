package wire

import (
	"fmt"
	"strings"
	"testing"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
)

// seedPod is a pod with something in most of what a plugin reports.
func seedPod() *corev1.Pod {
	started := metav1.Unix(1700000000, 5)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "busybox",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}},
		}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.0.0.1", StartTime: &started,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}},
		},
	}
}

// mustEncode is obj's encoding, for seeds.
func mustEncode[T any, P kubeObject[T]](f *testing.F, obj P) []byte {
	data, err := Encode(obj)
	if err != nil {
		f.Fatal(err)
	}
	return data
}

// fuzzDecode checks a decoder of plugin bytes: a refusal names what was
// decoded; what is accepted encodes and decodes back to the same object.
func fuzzDecode[T any, P kubeObject[T]](t *testing.T, data []byte, decode func(what string, data []byte) (*T, error), check func(*T)) {
	t.Helper()
	obj, err := decode("Call answer", data)
	if err != nil {
		if !strings.HasPrefix(err.Error(), "Call answer: ") {
			t.Fatalf("the error does not name the answer: %v", err)
		}
		return
	}
	check(obj)
	again, err := decode("Call answer", mustReencode[T, P](t, obj))
	if err != nil {
		t.Fatalf("an accepted %T, encoded again, is refused: %v", obj, err)
	}
	if !equality.Semantic.DeepEqual(obj, again) {
		t.Fatalf("an accepted %T decodes different once encoded again:\nfirst  %+v\nsecond %+v", obj, obj, again)
	}
}

func mustReencode[T any, P kubeObject[T]](t *testing.T, obj *T) []byte {
	t.Helper()
	data, err := Encode(P(obj))
	if err != nil {
		t.Fatalf("an accepted %T does not encode: %v", obj, err)
	}
	if len(data) == 0 {
		// Decode refuses empty bytes; an object that encodes to none has
		// nothing in it, which every accepted one has.
		t.Fatalf("an accepted %T encodes to nothing: %+v", obj, obj)
	}
	return data
}

// FuzzDecodePod: whatever bytes a plugin sends as a pod (GetPod, ListPods,
// WatchPods) or the daemon as a request's pod, DecodePod does not panic,
// refuses with an error naming the call, and what it accepts is named, has
// a phase of core/v1 and survives encoding again.
func FuzzDecodePod(f *testing.F) {
	f.Add(mustEncode(f, seedPod()))
	f.Add(mustEncode(f, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.PodStatus{Phase: "Exploded"}}))
	f.Add(mustEncode(f, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}}))
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzDecode[corev1.Pod](t, data, DecodePod, func(pod *corev1.Pod) {
			if pod.Name == "" || !knownPhases[pod.Status.Phase] {
				t.Fatalf("accepted a pod named %q in phase %q", pod.Name, pod.Status.Phase)
			}
		})
	})
}

// FuzzDecodePodStatus: as FuzzDecodePod, for GetPodStatus's answer.
func FuzzDecodePodStatus(f *testing.F) {
	f.Add(mustEncode(f, &seedPod().Status))
	f.Add(mustEncode(f, &corev1.PodStatus{Phase: "Exploded"}))
	f.Add([]byte{0x0a})
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzDecode[corev1.PodStatus](t, data, DecodePodStatus, func(s *corev1.PodStatus) {
			if !knownPhases[s.Phase] {
				t.Fatalf("accepted phase %q", s.Phase)
			}
		})
	})
}

// FuzzDecodeNode: as FuzzDecodePod, for the node a plugin describes
// (GetNode, WatchNode).
func FuzzDecodeNode(f *testing.F) {
	f.Add(mustEncode(f, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "vk0", Labels: map[string]string{"type": "virtual-kubelet"}},
		Status: corev1.NodeStatus{
			Capacity:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}))
	f.Add([]byte{0x0a, 0x02, 0x0a})
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzDecode[corev1.Node](t, data, Decode[corev1.Node], func(*corev1.Node) {})
	})
}

// FuzzFromStatus: whatever status a plugin answers a call with (code,
// message and details, as the grpc-status-details-bin trailer carries
// them), the daemon's error keeps its kind and message: NOT_FOUND and
// INVALID_ARGUMENT become the errdefs kinds, other codes stay reachable,
// and answered again by ToStatus the code is the plugin's.
func FuzzFromStatus(f *testing.F) {
	for _, st := range []*spb.Status{
		{Code: int32(codes.NotFound), Message: "pod ns/a not found"},
		{Code: int32(codes.InvalidArgument), Message: "bad annotation"},
		{Code: int32(codes.Unavailable), Message: "connection refused"},
		{Code: int32(codes.DeadlineExceeded)},
		{Code: 99, Message: "a code gRPC does not have"},
		{Code: -1},
	} {
		data, err := proto.Marshal(st)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var st spb.Status
		if proto.Unmarshal(data, &st) != nil {
			return // grpc refuses the trailer before the daemon sees it
		}
		sent := status.ErrorProto(&st)
		got := FromStatus("Call", sent)
		if sent == nil {
			if got != nil {
				t.Fatalf("OK became %v", got)
			}
			return
		}
		code := status.Code(sent)
		if errdefs.IsNotFound(got) != (code == codes.NotFound) || errdefs.IsInvalidInput(got) != (code == codes.InvalidArgument) {
			t.Fatalf("code %s became %v (NotFound %v, InvalidInput %v)", code, got, errdefs.IsNotFound(got), errdefs.IsInvalidInput(got))
		}
		if !strings.Contains(got.Error(), st.GetMessage()) {
			t.Fatalf("message %q lost: %v", st.GetMessage(), got)
		}
		if code != codes.NotFound && code != codes.InvalidArgument && (status.Code(got) != code || !strings.Contains(got.Error(), "Call")) {
			t.Fatalf("code %s became %v (code %s), or the call is not named", code, got, status.Code(got))
		}
		if again := status.Code(ToStatus(got)); again != code {
			t.Fatalf("code %s answered again as %s", code, again)
		}
	})
}

// FuzzDecodeResources: whatever quantity a plugin sends for a resource
// (WatchCapacity), DecodeResources does not panic, refuses with an error
// naming the resource, and what it accepts encodes and decodes to the same
// quantity.
func FuzzDecodeResources(f *testing.F) {
	for _, seed := range [][2]string{{"cpu", "4"}, {"memory", "16Gi"}, {"cpu", "four"}, {"nvidia.com/gpu", "1e3"}, {"x", "-1m"}, {"", ""}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, name, quantity string) {
		list, err := DecodeResources("Capacity event", map[string]string{name: quantity})
		if err != nil {
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("Capacity event: resource %q: ", name)) {
				t.Fatalf("the error does not name the event and the resource %q: %v", name, err)
			}
			return
		}
		again, err := DecodeResources("Capacity event", EncodeResources(list))
		if err != nil {
			t.Fatalf("an accepted quantity %q, encoded again, is refused: %v", quantity, err)
		}
		want, got := list[corev1.ResourceName(name)], again[corev1.ResourceName(name)]
		if want.Cmp(got) != 0 {
			t.Fatalf("%q decodes as %s, encoded again as %s", quantity, want.String(), got.String())
		}
	})
}

// FuzzResizeFromProto: whatever ResizePod request reaches a plugin, and
// whatever answer reaches the daemon, reading it does not panic; a request
// that is read reads the same once written again.
func FuzzResizeFromProto(f *testing.F) {
	from := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	to := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	req, err := proto.Marshal(&pb.ResizePodRequest{
		Pod:        mustEncode(f, seedPod()),
		Containers: []*pb.ContainerResize{{Name: "app", Change: &pb.ResourcesChange{From: mustEncode(f, &from), To: mustEncode(f, &to)}}},
		PodLevel:   &pb.ResourcesChange{To: mustEncode(f, &to)},
	})
	if err != nil {
		f.Fatal(err)
	}
	answer, err := proto.Marshal(&pb.ResizePodResponse{Outcome: pb.ResizeOutcome_RESIZE_OUTCOME_DEFERRED, Message: "later"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(req, answer)
	f.Add([]byte{0x12, 0x00}, []byte{0x08, 0x63})
	f.Fuzz(func(t *testing.T, reqData, answerData []byte) {
		var in pb.ResizePodRequest
		if proto.Unmarshal(reqData, &in) == nil {
			if req, err := ResizeFromProto(&in); err == nil {
				out, err := ResizeToProto(req)
				if err != nil {
					t.Fatalf("a request read does not write again: %v", err)
				}
				again, err := ResizeFromProto(out)
				if err != nil || !equality.Semantic.DeepEqual(req, again) {
					t.Fatalf("a request read reads different once written again (%v):\nfirst  %+v\nsecond %+v", err, req, again)
				}
			} else if !strings.HasPrefix(err.Error(), "ResizePod request") {
				t.Fatalf("the error does not name the request: %v", err)
			}
		}
		var answer pb.ResizePodResponse
		if proto.Unmarshal(answerData, &answer) == nil {
			if r, err := ResultFromProto(&answer); err == nil {
				if back, err := ResultToProto(r); err != nil || back.GetOutcome() != answer.GetOutcome() || back.GetMessage() != answer.GetMessage() {
					t.Fatalf("answer %v read as %+v, written back as %v (%v)", &answer, r, back, err)
				}
			}
		}
	})
}

// FuzzVolumesFromProto: whatever SetPodVolumes request reaches a plugin,
// reading its contents does not panic and keeps every volume and file.
func FuzzVolumesFromProto(f *testing.F) {
	data, err := proto.Marshal(&pb.SetPodVolumesRequest{
		Sources: []string{"configMap/cfg"}, RefreshAtUnixNano: 1700000000000000000,
		Volumes: []*pb.Volume{{Name: "cfg", Files: []*pb.File{{Path: "a", Data: []byte("x"), Mode: 0o644}, {Path: "../b"}}}},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		var req pb.SetPodVolumesRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		c := VolumesFromProto(&req)
		if len(c.Volumes) != len(req.GetVolumes()) {
			t.Fatalf("%d volumes read as %d", len(req.GetVolumes()), len(c.Volumes))
		}
		for i, v := range c.Volumes {
			if len(v.Files) != len(req.GetVolumes()[i].GetFiles()) {
				t.Fatalf("volume %q: %d files read as %d", v.Name, len(req.GetVolumes()[i].GetFiles()), len(v.Files))
			}
		}
		if at := req.GetRefreshAtUnixNano(); at != 0 && c.RefreshAt.UnixNano() != at {
			t.Fatalf("refresh at %d read as %s", at, c.RefreshAt)
		}
	})
}
