//go:build e2e

// Package faults_test tests virtual-kubelet --provider slurm through
// Slurm's failures and its own: slurmctld down, the daemon killed and
// started again, a job an administrator holds. Each test's Slurm is its
// own (package slurmtest).
package faults_test

import (
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
)

func TestMain(m *testing.M) { daemontest.Main(m) }
