package commands

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	apiruntime "k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vkubelet/virtual-kubelet/internal/version"
)

// restConfig loads the kubeconfig (a list, as in KUBECONFIG, is merged as
// kubectl does) or, without one, the in-cluster config.
func restConfig(o *ClientOptions, nodeName string) (*rest.Config, error) {
	var cfg *rest.Config
	if o.Kubeconfig == "" {
		var err error
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no kubeconfig given (--kubeconfig or KUBECONFIG) and no in-cluster config: %v", err)
		}
	} else {
		paths := filepath.SplitList(o.Kubeconfig)
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("kubeconfig: %v", err)
			}
		}
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: paths}
		var err error
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %v", o.Kubeconfig, err)
		}
	}
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	if o.KubeAPIQPS == 0 {
		cfg.QPS = -1 // no client-side limit
	}
	// Built-in types come back in the requested type; JSON stays acceptable
	// for anything that has no protobuf form.
	cfg.ContentType = o.KubeAPIContentType
	cfg.AcceptContentTypes = o.KubeAPIContentType
	if o.KubeAPIContentType != apiruntime.ContentTypeJSON {
		cfg.AcceptContentTypes += "," + apiruntime.ContentTypeJSON
	}
	if o.KubeAPIMaxInFlight > 0 {
		cfg.Wrap(limitInFlight(int64(o.KubeAPIMaxInFlight)))
	}
	cfg.UserAgent = fmt.Sprintf("virtual-kubelet/%s (%s/%s) node/%s", version.Version, runtime.GOOS, runtime.GOARCH, nodeName)
	return cfg, nil
}

// resolveNodeIP returns --node-ip, or the address of the interface of the
// default route, as the kubelet picks it.
func resolveNodeIP(nodeIP string) (string, error) {
	if nodeIP != "" {
		return nodeIP, nil
	}
	ip, err := utilnet.ChooseHostInterface()
	if err != nil {
		return "", fmt.Errorf("cannot tell the node's IP: set --node-ip or VKUBELET_POD_IP (%v)", err)
	}
	return ip.String(), nil
}
