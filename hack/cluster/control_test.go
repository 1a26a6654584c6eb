package main

import (
	"context"
	"strings"
	"testing"
)

// A name outside the control plane's components is refused before any
// component is touched (there is no control plane here to touch).
func TestRestartRefusesAnUnknownComponent(t *testing.T) {
	c := &control{}
	err := c.restart(context.Background(), nil, "sh -c reboot")
	if err == nil || !strings.Contains(err.Error(), `unknown component "sh -c reboot"`) || !strings.Contains(err.Error(), "kube-apiserver") {
		t.Errorf("err = %v, want one naming the component and the ones there are", err)
	}
}

func TestRestartWithoutACluster(t *testing.T) {
	err := restart([]string{"--dir", t.TempDir(), "kube-apiserver"})
	if err == nil || !strings.Contains(err.Error(), "no control plane is running") {
		t.Errorf("err = %v, want one saying no control plane runs there", err)
	}
	if err := restart([]string{"--dir", t.TempDir()}); err == nil || !strings.Contains(err.Error(), "usage: cluster restart") {
		t.Errorf("no component: err = %v, want the usage", err)
	}
}
