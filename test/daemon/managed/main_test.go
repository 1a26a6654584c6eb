//go:build e2e

// Package managed_test runs the daemon over Nodes that someone else
// creates (--manage-*), made the way Karpenter's kwok provider makes them.
package managed_test

import (
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
)

func TestMain(m *testing.M) { daemontest.Main(m) }
