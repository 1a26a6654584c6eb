package kubernetes

import (
	"context"
	"testing"

	"github.com/vkubelet/virtual-kubelet/node"
)

func TestResizeRefusedAsInfeasible(t *testing.T) {
	res, err := (&Provider{}).ResizePod(context.Background(), node.ResizeRequest{})
	if err != nil || res.Outcome != node.ResizeInfeasible || res.Message == "" {
		t.Errorf("ResizePod = %+v, %v; want Infeasible with a message", res, err)
	}
}
