package wire

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
)

// ResizeToProto is the ResizePod request of req.
func ResizeToProto(req node.ResizeRequest) (*pb.ResizePodRequest, error) {
	pod, err := Encode(req.Pod)
	if err != nil {
		return nil, fmt.Errorf("pod: %w", err)
	}
	out := &pb.ResizePodRequest{Pod: pod}
	for _, c := range req.Containers {
		change, err := changeToProto(c.From, c.To)
		if err != nil {
			return nil, fmt.Errorf("container %q: %w", c.Name, err)
		}
		out.Containers = append(out.Containers, &pb.ContainerResize{Name: c.Name, Change: change, Restart: c.Restart})
	}
	if req.PodLevel != nil {
		if out.PodLevel, err = changeToProto(req.PodLevel.From, req.PodLevel.To); err != nil {
			return nil, fmt.Errorf("pod-level resources: %w", err)
		}
	}
	return out, nil
}

func changeToProto(from, to corev1.ResourceRequirements) (*pb.ResourcesChange, error) {
	f, err := Encode(&from)
	if err != nil {
		return nil, err
	}
	t, err := Encode(&to)
	if err != nil {
		return nil, err
	}
	return &pb.ResourcesChange{From: f, To: t}, nil
}

// ResizeFromProto reads a ResizePod request; what is malformed is named.
func ResizeFromProto(in *pb.ResizePodRequest) (node.ResizeRequest, error) {
	pod, err := DecodePod("ResizePod request, pod", in.GetPod())
	if err != nil {
		return node.ResizeRequest{}, err
	}
	req := node.ResizeRequest{Pod: pod}
	for i, c := range in.GetContainers() {
		if c.GetName() == "" {
			return node.ResizeRequest{}, fmt.Errorf("ResizePod request, containers[%d]: no name", i)
		}
		from, to, err := changeFromProto(fmt.Sprintf("ResizePod request, container %q", c.GetName()), c.GetChange())
		if err != nil {
			return node.ResizeRequest{}, err
		}
		req.Containers = append(req.Containers, node.ContainerResize{Name: c.GetName(), From: from, To: to, Restart: c.GetRestart()})
	}
	if in.GetPodLevel() != nil {
		from, to, err := changeFromProto("ResizePod request, pod-level resources", in.GetPodLevel())
		if err != nil {
			return node.ResizeRequest{}, err
		}
		req.PodLevel = &node.PodLevelResize{From: from, To: to}
	}
	return req, nil
}

// changeFromProto reads a change; empty bytes are no resources (the
// encoding of empty requirements is empty).
func changeFromProto(what string, in *pb.ResourcesChange) (from, to corev1.ResourceRequirements, err error) {
	if err := from.Unmarshal(in.GetFrom()); err != nil {
		return from, to, fmt.Errorf("%s: malformed from: %v", what, err)
	}
	if err := to.Unmarshal(in.GetTo()); err != nil {
		return from, to, fmt.Errorf("%s: malformed to: %v", what, err)
	}
	return from, to, nil
}

// outcomes maps the library's resize outcomes to the contract's.
var outcomes = map[node.ResizeOutcome]pb.ResizeOutcome{
	node.ResizeDone:       pb.ResizeOutcome_RESIZE_OUTCOME_DONE,
	node.ResizeInProgress: pb.ResizeOutcome_RESIZE_OUTCOME_IN_PROGRESS,
	node.ResizeDeferred:   pb.ResizeOutcome_RESIZE_OUTCOME_DEFERRED,
	node.ResizeInfeasible: pb.ResizeOutcome_RESIZE_OUTCOME_INFEASIBLE,
}

// ResultToProto is the ResizePod answer of r; an outcome the contract
// does not have is an error.
func ResultToProto(r node.ResizeResult) (*pb.ResizePodResponse, error) {
	o, ok := outcomes[r.Outcome]
	if !ok {
		return nil, fmt.Errorf("resize outcome %s has no counterpart in the plugin contract", r.Outcome)
	}
	return &pb.ResizePodResponse{Outcome: o, Message: r.Message}, nil
}

// ResultFromProto reads a ResizePod answer; an unknown outcome is an
// error naming it.
func ResultFromProto(in *pb.ResizePodResponse) (node.ResizeResult, error) {
	for o, p := range outcomes {
		if p == in.GetOutcome() {
			return node.ResizeResult{Outcome: o, Message: in.GetMessage()}, nil
		}
	}
	return node.ResizeResult{}, fmt.Errorf("ResizePod answer: unknown outcome %v", in.GetOutcome())
}
