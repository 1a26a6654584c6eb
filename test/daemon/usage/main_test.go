//go:build e2e

package usage_test

import (
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
)

func TestMain(m *testing.M) { daemontest.Main(m) }
