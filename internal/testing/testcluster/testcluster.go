// Package testcluster gives end-to-end tests a real control plane.
//
// The tests that use it are built only with -tags e2e, so a plain
// `go test ./...` starts no control plane. A test package calls Main from
// TestMain. When $VK_TEST_CLUSTER names the directory of a running control
// plane (as `make test` and `make cluster-up` leave one), its tests share
// that one; otherwise Main starts a control plane for the package, with
// metrics-server where node hosts can exist, and stops it afterwards. Tests
// that disrupt the control plane (stopping the apiserver) take a Private one
// instead.
//
// With -short, e2e tests are skipped and no control plane is started.
package testcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vkubelet/virtual-kubelet/internal/testing/controlplane"
	"github.com/vkubelet/virtual-kubelet/internal/testing/nethost"
)

// EnvCluster names the directory of a running control plane to reuse.
const EnvCluster = "VK_TEST_CLUSTER"

// EnvBinDir names the directory holding the control-plane binaries; when it
// is unset, hack/controlplane/build.sh is run to find (or build) them.
const EnvBinDir = "VK_CONTROLPLANE_BIN"

// EnvMetricsServerBin names the metrics-server binary; when it is unset,
// hack/metrics-server/build.sh is run to find (or build) it.
const EnvMetricsServerBin = "VK_METRICS_SERVER_BIN"

// Cluster is a control plane a test can use.
type Cluster struct {
	Info   *controlplane.Info
	Config *rest.Config
	Client kubernetes.Interface

	// cp is set when this process started the control plane.
	cp *controlplane.ControlPlane
}

var (
	shared    *Cluster
	sharedErr error
)

// Main runs the package's tests with a shared cluster and exits. The
// teardown functions run after the tests, before the cluster stops.
func Main(m *testing.M, teardown ...func()) {
	flag.Parse()
	var stop func()
	if !testing.Short() {
		shared, stop, sharedErr = sharedCluster()
	}
	code := m.Run()
	for _, f := range teardown {
		f()
	}
	if stop != nil {
		stop()
	}
	os.Exit(code)
}

func sharedCluster() (*Cluster, func(), error) {
	if dir := os.Getenv(EnvCluster); dir != "" {
		info, err := controlplane.LoadInfo(dir)
		if err != nil {
			return nil, nil, fmt.Errorf("$%s=%s: %w", EnvCluster, dir, err)
		}
		c, err := newCluster(info, nil)
		return c, nil, err
	}
	dir, err := os.MkdirTemp("", "vk-testcluster-")
	if err != nil {
		return nil, nil, err
	}
	var configure []func(*controlplane.Config)
	if nethost.Available() == nil {
		bin, err := MetricsServerBin()
		if err != nil {
			return nil, nil, err
		}
		configure = append(configure, withMetricsServer(bin))
	}
	c, stop, err := start(dir, configure...)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	return c, func() { stop(); _ = os.RemoveAll(dir) }, nil
}

// Shared returns the package's cluster; the test is skipped with -short.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e test: skipped with -short")
	}
	if sharedErr != nil {
		t.Fatalf("no cluster: %v", sharedErr)
	}
	if shared == nil {
		t.Fatal("no cluster: the package's TestMain must call testcluster.Main")
	}
	return shared
}

// Private starts a control plane of the test's own, stopped when the test
// ends, for tests that stop and restart components or need a configuration
// of their own; configure, if given, adjusts it before it starts.
func Private(t testing.TB, configure ...func(*controlplane.Config)) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e test: skipped with -short")
	}
	c, stop, err := start(t.TempDir(), configure...)
	if err != nil {
		t.Fatalf("starting a private control plane: %v", err)
	}
	t.Cleanup(stop)
	return c
}

func withMetricsServer(bin string) func(*controlplane.Config) {
	return func(cfg *controlplane.Config) { cfg.MetricsServerBin = bin }
}

// MetricsServer returns a cluster that runs metrics-server: the package's
// shared one if it does, else a private one for the test. The test is skipped
// where node hosts, which metrics-server needs, cannot exist.
func MetricsServer(t testing.TB) *Cluster {
	t.Helper()
	if c := Shared(t); c.Info.MetricsServer != "" {
		return c
	}
	if err := nethost.Available(); err != nil {
		t.Skipf("metrics-server: %v", err)
	}
	bin, err := MetricsServerBin()
	if err != nil {
		t.Fatal(err)
	}
	t.Log("the shared cluster runs no metrics-server: starting a private one")
	return Private(t, withMetricsServer(bin))
}

func start(dir string, configure ...func(*controlplane.Config)) (*Cluster, func(), error) {
	bin, err := BinDir()
	if err != nil {
		return nil, nil, err
	}
	ctx := context.Background()
	cfg := controlplane.Config{Dir: dir, BinDir: bin}
	var network *nethost.Network
	if nethost.Available() == nil {
		if network, err = nethost.CreateNetwork(ctx, -1); err != nil {
			return nil, nil, err
		}
		cfg.NodeNetwork = network
	}
	deleteNetwork := func() {
		if network != nil {
			_ = network.Delete(ctx)
		}
	}
	for _, f := range configure {
		f(&cfg)
	}
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		deleteNetwork()
		return nil, nil, err
	}
	c, err := newCluster(cp.Info(), cp)
	stop := func() { cp.Stop(); deleteNetwork() }
	if err != nil {
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}

func newCluster(info *controlplane.Info, cp *controlplane.ControlPlane) (*Cluster, error) {
	cfg, err := info.RESTConfig()
	if err != nil {
		return nil, err
	}
	// Tests create objects in bursts; the client's default 5 QPS would make
	// them measure the client's rate limiter.
	cfg.QPS, cfg.Burst = 200, 400
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{Info: info, Config: cfg, Client: client, cp: cp}, nil
}

// BinDir returns the directory with the control-plane binaries and kubectl,
// building them when the cache is empty.
func BinDir() (string, error) {
	return cached(EnvBinDir, "controlplane")
}

// MetricsServerBin returns the metrics-server binary, building it when the
// cache is empty.
func MetricsServerBin() (string, error) {
	return cached(EnvMetricsServerBin, "metrics-server")
}

// cached returns $env, or else what hack/<dir>/build.sh prints.
func cached(env, dir string) (string, error) {
	if path := os.Getenv(env); path != "" {
		return path, nil
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate hack/%s/build.sh", dir)
	}
	script := filepath.Join(filepath.Dir(file), "..", "..", "..", "hack", dir, "build.sh")
	cmd := exec.Command("bash", script)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", script, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// ControlPlane returns the control plane this process started, for tests that
// stop and start components; it fails the test for a reused cluster.
func (c *Cluster) ControlPlane(t testing.TB) *controlplane.ControlPlane {
	t.Helper()
	if c.cp == nil {
		t.Fatal("the control plane was not started by this process; use testcluster.Private")
	}
	return c.cp
}

// UniqueName returns prefix followed by a random suffix, for names that must
// not collide with other tests sharing the cluster.
func UniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// Namespace creates a namespace for the test, waits until pods can be created
// in it (its default ServiceAccount exists) and deletes it when the test ends.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	name := UniqueName(dnsLabel(t.Name()))
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("waiting for the default ServiceAccount in %s: %v", name, err)
	}
	return name
}

// dnsLabel turns a test name into the start of a DNS label: lower case,
// letters, digits and dashes, short enough to leave room for a suffix.
func dnsLabel(testName string) string {
	n := strings.ToLower(strings.TrimPrefix(testName, "Test"))
	n = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, n)
	if len(n) > 40 {
		n = n[:40]
	}
	if n = strings.Trim(n, "-"); n == "" {
		n = "test"
	}
	return n
}

// AddHost creates a node host (see package nethost) for the test and deletes
// it when the test ends. The test is skipped where node hosts cannot exist.
func (c *Cluster) AddHost(t testing.TB, name string) *nethost.Host {
	t.Helper()
	if err := nethost.Available(); err != nil {
		t.Skipf("node host: %v", err)
	}
	if c.Info.NodeNetwork == nil {
		t.Fatal("the cluster has no node network")
	}
	h, err := c.Info.NodeNetwork.AddHost(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Delete(context.Background())
		c.deleteNodesAt(h.Addr.String())
	})
	return h
}

// deleteNodesAt deletes the Nodes whose InternalIP is addr. A later host
// may get the same address: a Node a test left behind would then point
// at that host's kubelet API too, and metrics-server, scraping both, would
// see each of its pods twice.
func (c *Cluster) deleteNodesAt(addr string) {
	ctx := context.Background()
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && a.Address == addr {
				_ = c.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
				break
			}
		}
	}
}

// KubectlCommand is the cluster's kubectl (same version as the control
// plane) with the admin kubeconfig and args, not yet started.
func (c *Cluster) KubectlCommand(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, filepath.Join(c.Info.BinDir, "kubectl"), append([]string{"--kubeconfig", c.Info.Kubeconfig}, args...)...)
}

// Kubectl runs the cluster's kubectl with the admin kubeconfig and returns
// its combined output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	out, err := c.KubectlCommand(ctx, args...).CombinedOutput()
	return string(out), err
}
