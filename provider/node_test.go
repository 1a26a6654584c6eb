package provider

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestNodeBasics(t *testing.T) {
	ctx := context.Background()
	b := NodeBasicsFrom(InitConfig{OperatingSystem: "linux", InternalIP: "10.213.0.2", DaemonPort: 10250})
	if a := b.NodeAddresses(ctx); len(a) != 1 || a[0].Type != corev1.NodeInternalIP || a[0].Address != "10.213.0.2" {
		t.Errorf("NodeAddresses = %v", a)
	}
	if e := b.NodeDaemonEndpoints(ctx); e.KubeletEndpoint.Port != 10250 {
		t.Errorf("NodeDaemonEndpoints = %v", e)
	}
	if b.OperatingSystem() != "linux" || (NodeBasics{}).NodeAddresses(ctx) != nil {
		t.Error("OperatingSystem, or addresses without an IP")
	}
	since := time.Unix(1700000000, 0)
	conds := HealthyConditions(since, "the backend")
	if len(conds) != 5 || conds[0].Type != corev1.NodeReady || conds[0].Status != corev1.ConditionTrue ||
		conds[0].Message != "the backend is ready" || !conds[0].LastTransitionTime.Time.Equal(since) {
		t.Errorf("HealthyConditions = %v", conds)
	}
	for _, c := range conds[1:] {
		if c.Status != corev1.ConditionFalse {
			t.Errorf("condition %s = %s, want False", c.Type, c.Status)
		}
	}
}
