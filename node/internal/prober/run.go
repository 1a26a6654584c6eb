package prober

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilexec "k8s.io/utils/exec"
)

// MaxOutput is how much of a probe's output (an exec probe's stdout and
// stderr, an HTTP probe's body) is read and kept for its Event: a pod author
// cannot make the node buffer more, as the kubelet caps it likewise.
const MaxOutput = 10 * 1024

// ExecFunc runs cmd in a container, writing its output to out; a non-zero
// exit is an error implementing k8s.io/utils/exec.ExitError.
type ExecFunc func(ctx context.Context, namespace, pod, container string, cmd []string, out io.Writer) error

// outcome is one probe run: its result and what it said.
type outcome struct {
	result Result
	output string
}

// unsupported says why a probe cannot be run here, or "" when it can.
func (m *Manager) unsupported(p *corev1.Probe) string {
	switch {
	case p.Exec != nil:
		if m.cfg.Exec == nil {
			return "exec probes need a provider that runs commands in containers"
		}
	case p.HTTPGet != nil, p.TCPSocket != nil, p.GRPC != nil:
		if !m.cfg.PodNetwork {
			return "HTTP, TCP and gRPC probes need the pod's IP reachable from the node, which the provider does not offer"
		}
	default:
		return "the probe has no handler"
	}
	return ""
}

// run carries out one probe of container c of pod. An error means the probe
// could not be run (not that it failed): its result is thrown away, as the
// kubelet does.
func (m *Manager) run(ctx context.Context, pod *corev1.Pod, c *corev1.Container, p *corev1.Probe) (outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, timeoutOf(p))
	defer cancel()
	switch {
	case p.Exec != nil:
		return m.runExec(ctx, pod, c, p.Exec.Command)
	case p.HTTPGet != nil:
		return m.runHTTP(ctx, pod, c, p.HTTPGet)
	case p.TCPSocket != nil:
		return runTCP(ctx, pod, c, p.TCPSocket)
	case p.GRPC != nil:
		return runGRPC(ctx, pod, p.GRPC)
	}
	return outcome{}, errors.New("the probe has no handler")
}

func (m *Manager) runExec(ctx context.Context, pod *corev1.Pod, c *corev1.Container, cmd []string) (outcome, error) {
	out := &cappedBuffer{}
	err := m.cfg.Exec(ctx, pod.Namespace, pod.Name, c.Name, cmd, out)
	var exitErr utilexec.ExitError
	switch {
	case err == nil:
		return outcome{Success, out.String()}, nil
	case errors.As(err, &exitErr):
		return outcome{Failure, out.String()}, nil
	case ctx.Err() != nil:
		return outcome{Failure, fmt.Sprintf("command %q timed out", strings.Join(cmd, " "))}, nil
	}
	return outcome{}, err
}

func (m *Manager) runHTTP(ctx context.Context, pod *corev1.Pod, c *corev1.Container, g *corev1.HTTPGetAction) (outcome, error) {
	addr, err := address(pod, c, g.Host, g.Port)
	if err != nil {
		return outcome{}, err
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if path != "" && !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u, err := url.Parse(scheme + "://" + addr + path)
	if err != nil {
		return outcome{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return outcome{}, err
	}
	req.Header.Set("User-Agent", m.cfg.UserAgent)
	req.Header.Set("Accept", "*/*")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return outcome{Failure, err.Error()}, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxOutput))
	if resp.StatusCode >= http.StatusOK && resp.StatusCode < http.StatusBadRequest {
		return outcome{Success, string(body)}, nil
	}
	return outcome{Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)}, nil
}

// probeClient is the process's client of HTTP probes, shared by every
// node's manager: it keeps no connection, so it holds nothing of a node's.
var probeClient = sync.OnceValue(newHTTPClient)

// newHTTPClient is the client of HTTP probes: no proxy, no connection kept
// between probes, the pod's certificate not verified (the kubelet's
// semantics), and redirects followed only on the same host; a redirect
// elsewhere counts as the 3xx it is.
func newHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:             nil,
			DisableKeepAlives: true,
			// A probe checks that the pod answers, not who it is.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // kubelet semantics
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 || req.URL.Hostname() != via[0].URL.Hostname() {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
}

func runTCP(ctx context.Context, pod *corev1.Pod, c *corev1.Container, t *corev1.TCPSocketAction) (outcome, error) {
	addr, err := address(pod, c, t.Host, t.Port)
	if err != nil {
		return outcome{}, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return outcome{Failure, err.Error()}, nil
	}
	_ = conn.Close()
	return outcome{Success, ""}, nil
}

func runGRPC(ctx context.Context, pod *corev1.Pod, g *corev1.GRPCAction) (outcome, error) {
	if pod.Status.PodIP == "" {
		return outcome{}, errors.New("the pod has no IP yet")
	}
	conn, err := grpc.NewClient(net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(g.Port))),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return outcome{}, err
	}
	defer conn.Close()
	service := ""
	if g.Service != nil {
		service = *g.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return outcome{Failure, fmt.Sprintf("gRPC health check: %v", err)}, nil
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return outcome{Failure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus())}, nil
	}
	return outcome{Success, ""}, nil
}

// address is the host:port an HTTP or TCP probe connects to: its host, or
// else the pod's IP, and its port.
func address(pod *corev1.Pod, c *corev1.Container, host string, port intstr.IntOrString) (string, error) {
	n, err := resolvePort(port, c)
	if err != nil {
		return "", err
	}
	if host == "" {
		if host = pod.Status.PodIP; host == "" {
			return "", errors.New("the pod has no IP yet")
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(n)), nil
}

// resolvePort is a probe's port: a number, or the name of one of the
// container's ports.
func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		if p.IntValue() < 1 || p.IntValue() > 65535 {
			return 0, fmt.Errorf("invalid port number %d", p.IntValue())
		}
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("container %q has no port named %q", c.Name, p.StrVal)
}

// cappedBuffer keeps the first MaxOutput bytes written to it and drops the
// rest, so a command's output never stops it. Stdout and stderr may write
// to it at once.
type cappedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := MaxOutput - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *cappedBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.b)
}
