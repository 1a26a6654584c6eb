package providerserver

import (
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
	"github.com/vkubelet/virtual-kubelet/plugin/wire"
)

// subscriberBuffer is how many pod events a WatchPods stream may fall
// behind before it is cut off; the daemon then subscribes again and gets
// every pod afresh, so nothing is lost, only resent.
const subscriberBuffer = 4096

// podFeed fans the provider's pod notifications out to the WatchPods
// streams. The provider's callback never blocks on a slow stream.
type podFeed struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

// subscriber is one WatchPods stream's queue.
type subscriber struct {
	events chan []byte
	// behind is closed when the stream fell behind and was dropped.
	behind chan struct{}
}

func newPodFeed() *podFeed { return &podFeed{subs: map[*subscriber]struct{}{}} }

// publish is the provider's NotifyPods callback.
func (f *podFeed) publish(pod *corev1.Pod) {
	data, err := wire.Encode(pod)
	if err != nil {
		return // a pod the k8s codec cannot encode cannot be sent either
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		select {
		case s.events <- data:
		default:
			delete(f.subs, s)
			close(s.behind)
		}
	}
}

func (f *podFeed) subscribe() *subscriber {
	s := &subscriber{events: make(chan []byte, subscriberBuffer), behind: make(chan struct{})}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs[s] = struct{}{}
	return s
}

func (f *podFeed) unsubscribe(s *subscriber) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, s)
}

// WatchPods implements pb.LifecycleServer. The stream subscribes before it
// lists the pods, so a change made while it lists is sent after the list:
// each pod's last message is its newest status.
func (s *services) WatchPods(_ *pb.WatchPodsRequest, stream pb.Lifecycle_WatchPodsServer) error {
	if s.feed == nil {
		return status.Error(codes.Unimplemented, "this plugin does not push pod status; poll ListPods")
	}
	sub := s.feed.subscribe()
	defer s.feed.unsubscribe(sub)
	ctx := stream.Context()
	list, err := s.ListPods(ctx, nil)
	if err != nil {
		return err
	}
	for _, data := range list.Pods {
		if err := stream.Send(&pb.PodEvent{Pod: data}); err != nil {
			return err
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.stopping:
			return status.Error(codes.Unavailable, "the plugin is stopping")
		case <-sub.behind:
			return status.Errorf(codes.ResourceExhausted, "WatchPods fell %d events behind; subscribe again", subscriberBuffer)
		case data := <-sub.events:
			if err := stream.Send(&pb.PodEvent{Pod: data}); err != nil {
				return err
			}
		}
	}
}
