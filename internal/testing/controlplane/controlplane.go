// Package controlplane starts a real Kubernetes control plane (etcd,
// kube-apiserver, kube-scheduler, kube-controller-manager) on loopback from
// binaries built by hack/controlplane/build.sh, for tests and `make run`,
// and optionally metrics-server (hack/metrics-server/build.sh) behind the
// apiserver's aggregation layer.
//
// Each component is a child process whose output goes to <Dir>/logs. The
// apiserver can also be exposed on a node network's gateway (see package
// nethost), through a TCP forwarder, so daemons inside node hosts reach it.
package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vkubelet/virtual-kubelet/internal/testing/freeport"
	"github.com/vkubelet/virtual-kubelet/internal/testing/nethost"
)

// Component names, also the names of their binaries and log files.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	Scheduler         = "kube-scheduler"
	ControllerManager = "kube-controller-manager"
	MetricsServer     = "metrics-server"
)

// ServiceCIDR is the cluster's service IP range.
const ServiceCIDR = "10.0.0.0/24"

// Config says where and how to run a control plane. Zero ports are picked
// from the free ones, so several control planes can run side by side.
type Config struct {
	// Dir holds everything the control plane writes: PKI, etcd data,
	// kubeconfigs, logs and info.json. It is created if missing.
	Dir string
	// BinDir holds the component binaries (see hack/controlplane/build.sh).
	BinDir string

	APIServerPort         int
	EtcdPort              int
	EtcdPeerPort          int
	SchedulerPort         int
	ControllerManagerPort int

	// NodeNetwork, when set, is where node hosts live: the apiserver's
	// certificate names its gateway and the apiserver is reachable there.
	NodeNetwork *nethost.Network

	// VerifyKubeletServingCerts makes the apiserver (and metrics-server)
	// verify the serving certificates of kubelets (our daemons) against the
	// cluster CA, as a hardened cluster does. Off, they accept any
	// certificate, as most do.
	VerifyKubeletServingCerts bool

	// MetricsServerBin, when set, is the metrics-server binary to run
	// behind the aggregation layer, so that `kubectl top` and
	// HorizontalPodAutoscalers work. It needs NodeNetwork: it listens on the
	// gateway, since the aggregator is never routed to loopback.
	MetricsServerBin  string
	MetricsServerPort int
}

// Info describes a running control plane; it is written to <Dir>/info.json
// so other processes (tests, `make run`) can use a control plane they did not
// start.
type Info struct {
	Dir    string `json:"dir"`
	BinDir string `json:"binDir"`
	// Server is the apiserver URL on loopback and Kubeconfig an admin
	// kubeconfig for it.
	Server     string `json:"server"`
	Kubeconfig string `json:"kubeconfig"`
	// CAFile is the cluster CA: it signed the serving and client certs and
	// signs CSRs through the controller-manager.
	CAFile    string `json:"caFile"`
	CAKeyFile string `json:"caKeyFile"`
	// NodeNetwork, NodeServer and NodeKubeconfig are set when node hosts
	// are available: NodeServer is the apiserver as seen from a node host.
	NodeNetwork    *nethost.Network `json:"nodeNetwork,omitempty"`
	NodeServer     string           `json:"nodeServer,omitempty"`
	NodeKubeconfig string           `json:"nodeKubeconfig,omitempty"`
	// MetricsServer is metrics-server's URL when it runs.
	MetricsServer string `json:"metricsServer,omitempty"`
	// Pid is the process supervising the components.
	Pid int `json:"pid"`
}

// InfoFile is the name of the file in Dir that holds the Info.
const InfoFile = "info.json"

// LoadInfo reads the Info of the control plane in dir.
func LoadInfo(dir string) (*Info, error) {
	data, err := os.ReadFile(filepath.Join(dir, InfoFile))
	if err != nil {
		return nil, err
	}
	var info Info
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, InfoFile), err)
	}
	return &info, nil
}

// LogFile is where the component's output goes.
func (i *Info) LogFile(component string) string {
	return filepath.Join(i.Dir, "logs", component+".log")
}

// RESTConfig returns an admin client config for the apiserver on loopback.
func (i *Info) RESTConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", i.Kubeconfig)
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	cfg        Config
	pki        pki
	info       Info
	components map[string]*process
	forwarder  *forwarder
}

// Start generates PKI and kubeconfigs, starts every component and returns once
// the apiserver is ready and the scheduler and controller-manager are healthy.
// On error, whatever was started is stopped again.
func Start(ctx context.Context, cfg Config) (_ *ControlPlane, retErr error) {
	if cfg.Dir == "" || cfg.BinDir == "" {
		return nil, errors.New("controlplane: Dir and BinDir are required")
	}
	if cfg.MetricsServerBin != "" && cfg.NodeNetwork == nil {
		return nil, errors.New("controlplane: metrics-server needs a node network to listen on (node hosts need root)")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	for _, p := range []*int{&cfg.APIServerPort, &cfg.EtcdPort, &cfg.EtcdPeerPort, &cfg.SchedulerPort, &cfg.ControllerManagerPort, &cfg.MetricsServerPort} {
		if *p == 0 {
			if *p, err = freeport.Next(); err != nil {
				return nil, err
			}
		}
	}
	for _, d := range []string{"logs", "etcd"} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, d), 0o700); err != nil {
			return nil, err
		}
	}

	cp := &ControlPlane{cfg: cfg, pki: pki{dir: filepath.Join(cfg.Dir, "pki")}, components: map[string]*process{}}
	defer func() {
		if retErr != nil {
			cp.Stop()
		}
	}()

	servingIPs := []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP("10.0.0.1")}
	if n := cfg.NodeNetwork; n != nil {
		servingIPs = append(servingIPs, n.Gateway.AsSlice())
	}
	if err := cp.pki.generate(servingIPs); err != nil {
		return nil, err
	}
	if err := cp.writeKubeconfigs(); err != nil {
		return nil, err
	}

	for _, name := range []string{Etcd, APIServer} {
		if err := cp.StartComponent(ctx, name); err != nil {
			return nil, err
		}
	}
	if n := cfg.NodeNetwork; n != nil {
		listen := netip.AddrPortFrom(n.Gateway, uint16(cfg.APIServerPort)).String()
		target := net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.APIServerPort))
		if cp.forwarder, err = startForwarder(listen, target); err != nil {
			return nil, err
		}
	}
	for _, name := range []string{Scheduler, ControllerManager} {
		if err := cp.StartComponent(ctx, name); err != nil {
			return nil, err
		}
	}
	if err := cp.waitClusterReady(ctx); err != nil {
		return nil, err
	}
	if cfg.MetricsServerBin != "" {
		if err := cp.startMetricsServer(ctx); err != nil {
			return nil, err
		}
	}
	cp.info.Pid = os.Getpid()
	data, err := json.MarshalIndent(cp.info, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(cfg.Dir, InfoFile), data, 0o600); err != nil {
		return nil, err
	}
	return cp, nil
}

// Info describes the running control plane.
func (c *ControlPlane) Info() *Info { return &c.info }

// args returns the command line of a component.
func (c *ControlPlane) args(name string) []string {
	cfg, p := c.cfg, c.pki
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(cfg.EtcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(cfg.EtcdPeerPort)
	kubeconfig := func(n string) string { return filepath.Join(cfg.Dir, n+".kubeconfig") }
	switch name {
	case Etcd:
		return []string{
			"--name=default",
			"--data-dir=" + filepath.Join(cfg.Dir, "etcd"),
			"--listen-client-urls=" + etcdURL,
			"--advertise-client-urls=" + etcdURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=default=" + peerURL,
			// A test cluster is thrown away: durability buys nothing.
			"--unsafe-no-fsync",
			// etcd's largest recommended backend: the default 2 GiB fills
			// up with the revisions of a 100,000-pod bench between the API
			// server's compactions.
			"--quota-backend-bytes=8589934592",
			"--log-level=warn",
		}
	case APIServer:
		args := []string{
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(cfg.APIServerPort),
			"--etcd-servers=" + etcdURL,
			"--tls-cert-file=" + p.leafCert("apiserver"),
			"--tls-private-key-file=" + p.leafKey("apiserver"),
			"--client-ca-file=" + p.caCert(),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + p.saPub(),
			"--service-account-signing-key-file=" + p.saKey(),
			"--service-cluster-ip-range=" + ServiceCIDR,
			"--authorization-mode=Node,RBAC",
			// The endpoint reconciler rejects the loopback advertise address.
			"--endpoint-reconciler-type=none",
			"--kubelet-client-certificate=" + p.leafCert("apiserver-kubelet-client"),
			"--kubelet-client-key=" + p.leafKey("apiserver-kubelet-client"),
			"--kubelet-preferred-address-types=InternalIP,Hostname",
			// API aggregation, as metrics-server needs. With no Service
			// network, the aggregator dials an APIService's endpoint
			// rather than its cluster IP.
			"--requestheader-client-ca-file=" + p.frontProxyCACert(),
			"--requestheader-allowed-names=" + frontProxyClient,
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file=" + p.leafCert(frontProxyClient),
			"--proxy-client-key-file=" + p.leafKey(frontProxyClient),
			"--enable-aggregator-routing=true",
			"--allow-privileged=true",
			"--feature-gates=" + FeatureGates,
		}
		if cfg.VerifyKubeletServingCerts {
			args = append(args, "--kubelet-certificate-authority="+p.caCert())
		}
		return args
	case Scheduler:
		return []string{
			"--kubeconfig=" + kubeconfig(Scheduler),
			"--authentication-kubeconfig=" + kubeconfig(Scheduler),
			"--authorization-kubeconfig=" + kubeconfig(Scheduler),
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(cfg.SchedulerPort),
			"--leader-elect=false",
		}
	case ControllerManager:
		return []string{
			"--kubeconfig=" + kubeconfig(ControllerManager),
			"--authentication-kubeconfig=" + kubeconfig(ControllerManager),
			"--authorization-kubeconfig=" + kubeconfig(ControllerManager),
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(cfg.ControllerManagerPort),
			"--leader-elect=false",
			"--use-service-account-credentials=true",
			"--service-account-private-key-file=" + p.saKey(),
			"--root-ca-file=" + p.caCert(),
			"--cluster-signing-cert-file=" + p.caCert(),
			"--cluster-signing-key-file=" + p.caKey(),
			"--controllers=*,bootstrapsigner,tokencleaner",
			// The HorizontalPodAutoscaler controller (in "*") reads
			// metrics.k8s.io; every 5s rather than 15s, so a local
			// cluster's `kubectl get hpa` follows metrics-server closely.
			"--horizontal-pod-autoscaler-sync-period=5s",
		}
	case MetricsServer:
		return c.metricsServerArgs()
	}
	return nil
}

// FeatureGates are the API server's gates, off by default in 1.36, that
// the features the virtual kubelet reports need: ContainerStopSignals
// (alpha), without which the API server drops lifecycle.stopSignal.
const FeatureGates = "ContainerStopSignals=true"

// StartComponent starts one component and waits until it is healthy.
// Together with StopComponent it lets a test take the apiserver away and
// bring it back.
func (c *ControlPlane) StartComponent(ctx context.Context, name string) error {
	if p := c.components[name]; p != nil && !p.Exited() {
		return fmt.Errorf("%s is already running", name)
	}
	bin := filepath.Join(c.cfg.BinDir, name)
	if name == MetricsServer {
		bin = c.cfg.MetricsServerBin
	}
	p, err := startProcess(bin, c.args(name), c.info.LogFile(name))
	if err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	c.components[name] = p
	if err := c.waitHealthy(ctx, name); err != nil {
		return fmt.Errorf("%s did not become healthy: %w (log: %s)", name, err, p.logPath)
	}
	return nil
}

// StopComponent stops one component (SIGTERM, then SIGKILL after a few
// seconds) and returns once it has exited.
func (c *ControlPlane) StopComponent(name string) error {
	p := c.components[name]
	if p == nil {
		return fmt.Errorf("%s was never started", name)
	}
	p.stop()
	return nil
}

// KillComponent kills one component with SIGKILL, as a crash does (no
// graceful shutdown, no final writes), and returns once it has exited.
func (c *ControlPlane) KillComponent(name string) error {
	p := c.components[name]
	if p == nil {
		return fmt.Errorf("%s was never started", name)
	}
	p.Kill()
	return nil
}

// Stop stops every component, newest first. The data directory stays; the
// caller owns it.
func (c *ControlPlane) Stop() {
	if c.forwarder != nil {
		c.forwarder.close()
	}
	for _, name := range []string{MetricsServer, ControllerManager, Scheduler, APIServer, Etcd} {
		if p := c.components[name]; p != nil {
			p.stop()
		}
	}
}

func (c *ControlPlane) writeKubeconfigs() error {
	server := "https://127.0.0.1:" + strconv.Itoa(c.cfg.APIServerPort)
	c.info = Info{
		Dir:        c.cfg.Dir,
		BinDir:     c.cfg.BinDir,
		Server:     server,
		Kubeconfig: filepath.Join(c.cfg.Dir, "admin.kubeconfig"),
		CAFile:     c.pki.caCert(),
		CAKeyFile:  c.pki.caKey(),
	}
	files := map[string]string{
		"admin":           server,
		Scheduler:         server,
		ControllerManager: server,
		MetricsServer:     server,
	}
	if n := c.cfg.NodeNetwork; n != nil {
		c.info.NodeNetwork = n
		c.info.NodeServer = "https://" + netip.AddrPortFrom(n.Gateway, uint16(c.cfg.APIServerPort)).String()
		c.info.NodeKubeconfig = filepath.Join(c.cfg.Dir, "admin-node.kubeconfig")
		files["admin-node"] = c.info.NodeServer
	}
	for file, srv := range files {
		identity := file
		if file == "admin-node" {
			identity = "admin"
		}
		cfg, err := Kubeconfig(srv, c.pki.caCert(), c.pki.leafCert(identity), c.pki.leafKey(identity))
		if err != nil {
			return err
		}
		if err := clientcmd.WriteToFile(*cfg, filepath.Join(c.cfg.Dir, file+".kubeconfig")); err != nil {
			return err
		}
	}
	return nil
}

// Kubeconfig builds a kubeconfig for server that trusts caFile and
// authenticates with a client certificate. The files are embedded so the
// kubeconfig can be copied elsewhere on its own.
func Kubeconfig(server, caFile, certFile, keyFile string) (*clientcmdapi.Config, error) {
	cfg := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server = server
	cluster.CertificateAuthority = caFile
	user := clientcmdapi.NewAuthInfo()
	user.ClientCertificate = certFile
	user.ClientKey = keyFile
	kctx := clientcmdapi.NewContext()
	kctx.Cluster, kctx.AuthInfo = "local", "admin"
	cfg.Clusters["local"] = cluster
	cfg.AuthInfos["admin"] = user
	cfg.Contexts["local"] = kctx
	cfg.CurrentContext = "local"
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}
