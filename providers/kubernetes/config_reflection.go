package kubernetes

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// validateReflection checks services, home and reflection, and fills in
// their defaults.
func (c *Config) validateReflection() error {
	s := &c.Services
	switch s.Select {
	case "":
		s.Select = SelectUsed
	case SelectUsed, SelectAll, SelectNone:
	default:
		return fmt.Errorf("services.select: %q must be %s, %s or %s", s.Select, SelectUsed, SelectAll, SelectNone)
	}
	for i, ns := range s.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("services.namespaces[%d]: %q: %s", i, ns, strings.Join(errs, "; "))
		}
	}
	if _, err := labels.Parse(s.LabelSelector); err != nil {
		return fmt.Errorf("services.labelSelector: %q: %v", s.LabelSelector, err)
	}
	if c.Home.APIServer != "" {
		if _, _, err := c.Home.hostPort(); err != nil {
			return fmt.Errorf("home.apiServer: %q: %v", c.Home.APIServer, err)
		}
	}
	r := &c.Reflection
	if r.MaxObjects < 0 {
		return fmt.Errorf("reflection.maxObjects: must not be negative, got %d", r.MaxObjects)
	}
	if r.MaxObjects == 0 {
		r.MaxObjects = DefaultMaxObjects
	}
	if r.MaxBytes == "" {
		r.MaxBytes = DefaultMaxBytes
	}
	q, err := resource.ParseQuantity(r.MaxBytes)
	if err != nil {
		return fmt.Errorf("reflection.maxBytes: invalid quantity %q: %v", r.MaxBytes, err)
	}
	if q.Sign() <= 0 {
		return fmt.Errorf("reflection.maxBytes: %q must be positive", r.MaxBytes)
	}
	return nil
}

// hostPort splits APIServer into the host and port of the pods'
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (443 when the URL
// names none).
func (h HomeConfig) hostPort() (host, port string, err error) {
	u, err := url.Parse(h.APIServer)
	if err != nil {
		return "", "", err
	}
	switch {
	case u.Scheme != "https":
		return "", "", fmt.Errorf("the scheme must be https (in-cluster clients speak TLS), got %q", u.Scheme)
	case u.Hostname() == "":
		return "", "", fmt.Errorf("no host")
	case u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return "", "", fmt.Errorf("only https://host[:port] (clients in pods take the host and port alone)")
	}
	host, port = u.Hostname(), u.Port()
	if port == "" {
		port = "443"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("port %q is not a port number", port)
	}
	if net.ParseIP(host) == nil {
		if errs := validation.IsDNS1123Subdomain(host); len(errs) > 0 {
			return "", "", fmt.Errorf("host %q: %s", host, strings.Join(errs, "; "))
		}
	}
	return host, port, nil
}

// maxBytes is Reflection.MaxBytes; validate has checked it.
func (c *Config) maxBytes() int64 {
	q := resource.MustParse(c.Reflection.MaxBytes)
	return q.Value()
}
