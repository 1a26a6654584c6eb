package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// soakStreams opens and closes, through the API server as kubectl does,
// logs -f streams, exec sessions and port-forwards to the churn's Running
// pods, and reads the metrics API; it counts how each kind fared.
type soakStreams struct {
	client  kubernetes.Interface
	rest    *rest.Config
	metrics metricsclient.Interface
	ns      string
	watch   *soakWatch
	// outages are the API server's restarts so far: a failure in one (or
	// shortly after) is expected.
	outages *soakOutages

	mu     sync.Mutex
	counts map[string]*streamCount
	// metricsNodes is the most nodes of the soak's seen in one read of
	// the node metrics.
	metricsNodes int
}

// streamCount is how the sessions of one kind went.
type streamCount struct {
	OK, Failed int
	// InOutage failed during an API server restart or just after it.
	InOutage int
	// LastErr is the last failure outside the restarts.
	LastErr string
}

// soakOutages records the API server's restarts.
type soakOutages struct {
	mu      sync.Mutex
	windows [][2]time.Time // start, end (zero while under way)
}

// outageGrace is how long after a restart clients may still fail:
// streams reconnect, the aggregator rediscovers metrics-server.
const outageGrace = 30 * time.Second

func (o *soakOutages) begin() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.windows = append(o.windows, [2]time.Time{time.Now()})
	return len(o.windows) - 1
}

func (o *soakOutages) end(i int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.windows[i][1] = time.Now()
}

// covers says whether a session from start to now overlapped a restart or
// its grace.
func (o *soakOutages) covers(start time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, w := range o.windows {
		if w[1].IsZero() || !start.After(w[1].Add(outageGrace)) {
			if !time.Now().Before(w[0]) {
				return true
			}
		}
	}
	return false
}

// record counts one session of kind that started at start.
func (s *soakStreams) record(kind string, start time.Time, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.counts[kind]
	if c == nil {
		c = &streamCount{}
		s.counts[kind] = c
	}
	switch {
	case err == nil:
		c.OK++
	case s.outages.covers(start):
		c.Failed++
		c.InOutage++
	default:
		c.Failed++
		c.LastErr = err.Error()
	}
}

// run runs workers of each kind until ctx ends.
func (s *soakStreams) run(ctx context.Context, workers int) {
	kinds := map[string]func(context.Context, string) error{
		"logs -f":      s.followLogs,
		"exec":         s.exec,
		"port-forward": s.portForward,
	}
	var wg sync.WaitGroup
	for kind, session := range kinds {
		for range workers {
			wg.Go(func() {
				for ctx.Err() == nil {
					pod := s.watch.pickRunning(15 * time.Second)
					if pod == "" {
						sleepCtx(ctx, 200*time.Millisecond)
						continue
					}
					start := time.Now()
					sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					err := session(sctx, pod)
					cancel()
					if ctx.Err() == nil {
						s.record(kind, start, err)
					}
					sleepCtx(ctx, time.Duration(200+rand.IntN(800))*time.Millisecond)
				}
			})
		}
	}
	wg.Go(func() {
		// metrics-server has not scraped the new nodes yet.
		sleepCtx(ctx, time.Minute)
		for ctx.Err() == nil {
			start := time.Now()
			err := s.readMetrics(ctx)
			if ctx.Err() == nil {
				s.record("metrics API read", start, err)
			}
			sleepCtx(ctx, 15*time.Second)
		}
	})
	wg.Wait()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// followLogs follows the pod's log for a few seconds, as kubectl logs -f,
// and wants lines.
func (s *soakStreams) followLogs(ctx context.Context, pod string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(2000+rand.IntN(4000))*time.Millisecond)
	defer cancel()
	r, err := s.client.CoreV1().Pods(s.ns).GetLogs(pod, &corev1.PodLogOptions{Container: "main", Follow: true}).Stream(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	lines := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		lines++
	}
	if lines == 0 {
		return fmt.Errorf("logs -f %s: no line (%v)", pod, sc.Err())
	}
	return nil
}

// exec runs echo in the pod through the API server over WebSocket, as
// kubectl exec does, and wants its output.
func (s *soakStreams) exec(ctx context.Context, pod string) error {
	u := s.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(s.ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "main", Command: []string{"echo", "soak"}, Stdout: true}, scheme.ParameterCodec).URL()
	ex, err := remotecommand.NewWebSocketExecutor(s.rest, http.MethodGet, u.String())
	if err != nil {
		return err
	}
	var out strings.Builder
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out}); err != nil {
		return err
	}
	if out.String() != "soak\n" {
		return fmt.Errorf("exec echo soak in %s: got %q", pod, out.String())
	}
	return nil
}

// portForward forwards a local port to the pod's echo port over
// WebSocket, as kubectl port-forward does, and wants a line echoed.
func (s *soakStreams) portForward(ctx context.Context, pod string) error {
	u := s.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(s.ns).Name(pod).SubResource("portforward").URL()
	dialer, err := portforward.NewSPDYOverWebsocketDialer(u, s.rest)
	if err != nil {
		return err
	}
	stop, ready := make(chan struct{}), make(chan struct{})
	defer close(stop)
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", echoPort)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		return fmt.Errorf("port-forward %s: %w", pod, err)
	case <-ctx.Done():
		return ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		return fmt.Errorf("port-forward %s: ports %v: %v", pod, ports, err)
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	if _, err := conn.Write([]byte("soak\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("port-forward %s: reading the echo: %w", pod, err)
	}
	if line != "soak\n" {
		return fmt.Errorf("port-forward %s: echoed %q", pod, line)
	}
	return nil
}

// readMetrics reads the node and pod metrics through the metrics API, as
// kubectl top does, and wants the soak's nodes in it.
func (s *soakStreams) readMetrics(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	nodes, err := s.metrics.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if _, err := s.metrics.MetricsV1beta1().PodMetricses(s.ns).List(ctx, metav1.ListOptions{}); err != nil {
		return err
	}
	ours := 0
	for _, n := range nodes.Items {
		if strings.HasPrefix(n.Name, soakNodePrefix) {
			ours++
		}
	}
	s.mu.Lock()
	s.metricsNodes = max(s.metricsNodes, ours)
	s.mu.Unlock()
	if ours == 0 {
		return errors.New("the node metrics have none of the soak's nodes")
	}
	return nil
}

// summary is one line per kind of session.
func (s *soakStreams) summary() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for kind, c := range s.counts {
		line := fmt.Sprintf("%s: %d ok, %d failed (%d during an API server restart or within %s of it)", kind, c.OK, c.Failed, c.InOutage, outageGrace)
		if c.LastErr != "" {
			line += "; last other failure: " + c.LastErr
		}
		out = append(out, line)
	}
	sort.Strings(out)
	out = append(out, fmt.Sprintf("metrics API: at most %d of the soak's nodes in one read", s.metricsNodes))
	return out
}
