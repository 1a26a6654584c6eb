package controlplane

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// startupTimeout bounds how long one component may take to become healthy.
const startupTimeout = 2 * time.Minute

// waitHealthy polls the component's health endpoint until it answers ok, the
// process exits, or the timeout passes.
func (c *ControlPlane) waitHealthy(ctx context.Context, name string) error {
	check, err := c.healthCheck(name)
	if err != nil {
		return err
	}
	p := c.components[name]
	var last error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, startupTimeout, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("exited: %w", p.exitErr())
		}
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (last check: %v)", err, last)
	}
	return err
}

func (c *ControlPlane) healthCheck(name string) (func(context.Context) error, error) {
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		// Scheduler and controller-manager serve with self-signed certificates.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
	}}
	get := func(client *http.Client, url string) func(context.Context) error {
		return func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", url, resp.Status)
			}
			return nil
		}
	}
	switch name {
	case Etcd:
		return get(http.DefaultClient, "http://127.0.0.1:"+strconv.Itoa(c.cfg.EtcdPort)+"/health"), nil
	case Scheduler:
		return get(insecure, "https://127.0.0.1:"+strconv.Itoa(c.cfg.SchedulerPort)+"/healthz"), nil
	case ControllerManager:
		return get(insecure, "https://127.0.0.1:"+strconv.Itoa(c.cfg.ControllerManagerPort)+"/healthz"), nil
	case MetricsServer:
		// Its /readyz waits for a scrape, which an empty cluster never gives.
		return get(insecure, c.metricsServerURL()+"/livez"), nil
	case APIServer:
		client, err := c.client()
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			_, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			return err
		}, nil
	}
	return nil, fmt.Errorf("unknown component %q", name)
}

func (c *ControlPlane) client() (kubernetes.Interface, error) {
	cfg, err := c.info.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 5 * time.Second
	return kubernetes.NewForConfig(cfg)
}

// waitClusterReady waits until the controllers act: the service-account
// controller has made the default namespace's ServiceAccount, which every pod
// creation needs.
func (c *ControlPlane) waitClusterReady(ctx context.Context) error {
	client, err := c.client()
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, startupTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the controller-manager to create the default ServiceAccount: %w", err)
	}
	return nil
}
