package metrics

import (
	"errors"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// TestProviderCallResults: a NotFound answer is counted apart from errors.
func TestProviderCallResults(t *testing.T) {
	ObserveProviderCall("GetPodStatus", time.Millisecond, nil)
	ObserveProviderCall("GetPodStatus", time.Millisecond, errdefs.NotFoundf("pod ns/p is not in the provider"))
	ObserveProviderCall("GetPodStatus", time.Millisecond, errdefs.NotFoundf("pod ns/q is not in the provider"))
	ObserveProviderCall("GetPodStatus", time.Millisecond, errors.New("backend unreachable"))
	for result, want := range map[string]uint64{"success": 1, "not_found": 2, "error": 1} {
		got, err := testutil.GetHistogramMetricCount(providerCallDuration.WithLabelValues("GetPodStatus", result))
		if err != nil || got != want {
			t.Errorf("result %q: %d calls (%v), want %d", result, got, err, want)
		}
	}
}
