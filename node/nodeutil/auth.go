package nodeutil

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"

	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/trace"
)

// Auth authenticates kubelet API requests, maps them to authorization
// attributes and authorizes them.
type Auth = api.Auth

// WithAuth wraps h so that every request is authenticated (401 if it
// cannot be) and authorized (403 if denied) by auth; GET /healthz is
// served to anyone.
func WithAuth(auth Auth, h http.Handler) http.Handler { return api.WithAuth(h, auth) }

// NodeRequestAttr maps requests to the attributes the kubelet authorizes
// them with, for the node named NodeName (see api.NodeRequestAttributes).
type NodeRequestAttr struct {
	NodeName string
}

// GetRequestAttributes implements authorizer.RequestAttributesGetter.
func (a NodeRequestAttr) GetRequestAttributes(u user.Info, r *http.Request) authorizer.Attributes {
	return api.NodeRequestAttributes(a.NodeName, u, r)
}

// NoAuth lets every request through as system:anonymous. Use it only where
// the network itself is trusted.
func NoAuth() Auth { return noAuth{} }

type noAuth struct{}

func (noAuth) AuthenticateRequest(*http.Request) (*authenticator.Response, bool, error) {
	return &authenticator.Response{User: &user.DefaultInfo{
		Name:   user.Anonymous,
		Groups: []string{user.AllUnauthenticated},
	}}, true, nil
}

func (noAuth) GetRequestAttributes(u user.Info, r *http.Request) authorizer.Attributes {
	return api.NodeRequestAttributes("", u, r)
}

func (noAuth) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
}

// WebhookAuthConfig configures WebhookAuth: the delegating authenticator
// (client certificates, bearer tokens through TokenReview) and authorizer
// (SubjectAccessReview) of k8s.io/apiserver.
type WebhookAuthConfig struct {
	AuthnConfig authenticatorfactory.DelegatingAuthenticatorConfig
	AuthzConfig authorizerfactory.DelegatingAuthorizerConfig
}

// WebhookAuthOption adjusts a WebhookAuthConfig, for example to set
// AuthnConfig.ClientCertificateCAContentProvider so that client
// certificates (the API server's) are accepted.
type WebhookAuthOption func(*WebhookAuthConfig) error

// WebhookAuth returns the Auth of the kubelet's Webhook modes for the node
// named nodeName: bearer tokens are reviewed and every request authorized by
// the API server through client, with the kubelet's cache lifetimes.
func WebhookAuth(client kubernetes.Interface, nodeName string, opts ...WebhookAuthOption) (Auth, error) {
	backoff := api.WebhookRetryBackoff()
	cfg := WebhookAuthConfig{
		AuthnConfig: authenticatorfactory.DelegatingAuthenticatorConfig{
			Anonymous:                &apiserver.AnonymousAuthConfig{},
			TokenAccessReviewClient:  client.AuthenticationV1(),
			TokenAccessReviewTimeout: api.DefaultWebhookTimeout,
			WebhookRetryBackoff:      &backoff,
			CacheTTL:                 api.DefaultAuthenticationCacheTTL,
		},
		AuthzConfig: authorizerfactory.DelegatingAuthorizerConfig{
			SubjectAccessReviewClient: client.AuthorizationV1(),
			AllowCacheTTL:             api.DefaultAuthorizedCacheTTL,
			DenyCacheTTL:              api.DefaultUnauthorizedCacheTTL,
			WebhookRetryBackoff:       &backoff,
		},
	}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	authn, _, err := cfg.AuthnConfig.New()
	if err != nil {
		return nil, fmt.Errorf("webhook authentication: %w", err)
	}
	authz, err := cfg.AuthzConfig.New()
	if err != nil {
		return nil, fmt.Errorf("webhook authorization: %w", err)
	}
	return api.NewAuthFrom(authn, authz, nodeName), nil
}

// InstrumentAuth traces auth's authentication and authorization calls.
func InstrumentAuth(auth Auth) Auth { return instrumentedAuth{auth} }

type instrumentedAuth struct{ Auth }

func (a instrumentedAuth) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	ctx, span := trace.StartSpan(r.Context(), "AuthenticateRequest")
	defer span.End()
	resp, ok, err := a.Auth.AuthenticateRequest(r.WithContext(ctx))
	span.SetStatus(err)
	if resp != nil && resp.User != nil {
		span.WithField(ctx, "user", resp.User.GetName())
	}
	return resp, ok, err
}

func (a instrumentedAuth) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	ctx, span := trace.StartSpan(ctx, "Authorize")
	defer span.End()
	d, reason, err := a.Auth.Authorize(ctx, attrs)
	span.SetStatus(err)
	span.WithFields(ctx, map[string]any{"decision": int(d), "reason": reason})
	return d, reason, err
}
