package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/utils/clock"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// Defaults of AuthConfig, those of the kubelet.
const (
	// DefaultAuthenticationCacheTTL is how long a TokenReview answer, or
	// a verified client certificate chain, is cached.
	DefaultAuthenticationCacheTTL = 2 * time.Minute
	// DefaultAuthorizedCacheTTL is how long an allowing
	// SubjectAccessReview answer is cached.
	DefaultAuthorizedCacheTTL = 5 * time.Minute
	// DefaultUnauthorizedCacheTTL is how long a denying
	// SubjectAccessReview answer is cached.
	DefaultUnauthorizedCacheTTL = 30 * time.Second
	// DefaultWebhookTimeout bounds a TokenReview call.
	DefaultWebhookTimeout = 10 * time.Second
)

// AuthConfig configures the authentication and authorization of the
// kubelet API, delegated to the apiserver as the kubelet's Webhook modes do.
type AuthConfig struct {
	// ClientCAFile is a PEM bundle of the CAs whose client certificates
	// authenticate users (CN the user name, O its groups); the file is
	// reloaded when it changes. Empty disables client certificates. The TLS
	// server must ask for client certificates (tls.RequestClientCert is
	// enough: they are verified here).
	ClientCAFile string
	// ClientCA is a PEM bundle used like ClientCAFile when that is empty,
	// for a CA held in memory (such as a kubeconfig's).
	ClientCA []byte
	// Anonymous lets requests with no credentials through as user
	// system:anonymous (group system:unauthenticated), still subject to
	// authorization. Off by default, as it should be.
	Anonymous bool
	// TokenReviewClient verifies bearer tokens with TokenReviews, for
	// example clientset.AuthenticationV1(). Nil disables bearer tokens.
	TokenReviewClient authenticationv1.AuthenticationV1Interface
	// SubjectAccessReviewClient authorizes requests with
	// SubjectAccessReviews, for example clientset.AuthorizationV1().
	// Required.
	SubjectAccessReviewClient authorizationv1.AuthorizationV1Interface
	// APIAudiences are the audiences a token must be for; empty means the
	// apiserver's own.
	APIAudiences []string
	// AuthenticationCacheTTL caches token reviews and verified client
	// certificate chains (never past the chain's expiry, nor across a
	// change of the client CA); 0 means DefaultAuthenticationCacheTTL.
	AuthenticationCacheTTL time.Duration
	// AuthorizedCacheTTL and UnauthorizedCacheTTL cache access reviews;
	// 0 means DefaultAuthorizedCacheTTL and DefaultUnauthorizedCacheTTL.
	AuthorizedCacheTTL   time.Duration
	UnauthorizedCacheTTL time.Duration
	// NodeName is the name of the node the requests are authorized
	// against (resource nodes, this name). Required.
	NodeName string
}

// Auth authenticates kubelet API requests, maps them to authorization
// attributes and authorizes them; WithAuth uses one.
type Auth interface {
	authenticator.Request
	authorizer.RequestAttributesGetter
	authorizer.Authorizer
}

// NewAuth returns the Auth of cfg: client certificates against
// cfg.ClientCAFile, bearer tokens through TokenReview, anonymous requests
// if enabled, then SubjectAccessReview on the attributes of
// NodeRequestAttributes, all with caching. ctx bounds the goroutine that
// reloads the client CA file.
func NewAuth(ctx context.Context, cfg AuthConfig) (Auth, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("kubelet API auth: a node name is required")
	}
	if cfg.SubjectAccessReviewClient == nil {
		return nil, errors.New("kubelet API auth: a SubjectAccessReview client is required")
	}
	backoff := WebhookRetryBackoff()
	authnTTL := orDefault(cfg.AuthenticationCacheTTL, DefaultAuthenticationCacheTTL)

	// The apiserver's delegating authenticator, composed here as its
	// factory does (certificates, then tokens, then anonymous if enabled)
	// so that client certificates are verified once per chain, not once
	// per request.
	var authns []authenticator.Request
	var clientCA dynamiccertificates.CAContentProvider
	switch {
	case cfg.ClientCAFile != "":
		ca, err := dynamiccertificates.NewDynamicCAContentFromFile("client-ca-bundle", cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("kubelet API auth: client CA: %w", err)
		}
		go ca.Run(ctx, 1)
		clientCA = ca
	case len(cfg.ClientCA) > 0:
		ca, err := dynamiccertificates.NewStaticCAContent("client-ca-bundle", cfg.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("kubelet API auth: client CA: %w", err)
		}
		clientCA = ca
	}
	if clientCA != nil {
		authns = append(authns, newVerifiedClientCerts(clientCA.VerifyOptions, authnTTL, clock.RealClock{}))
	}
	if cfg.TokenReviewClient != nil {
		tokens, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
			TokenAccessReviewClient:  cfg.TokenReviewClient,
			TokenAccessReviewTimeout: DefaultWebhookTimeout,
			WebhookRetryBackoff:      &backoff,
			CacheTTL:                 authnTTL,
			APIAudiences:             cfg.APIAudiences,
		}.New()
		if err != nil {
			return nil, fmt.Errorf("kubelet API auth: %w", err)
		}
		authns = append(authns, tokens)
	}
	if len(authns) == 0 && !cfg.Anonymous {
		return nil, errors.New("kubelet API auth: no authentication method configured (a client CA, a TokenReview client or anonymous requests)")
	}
	a := group.NewAuthenticatedGroupAdder(union.New(authns...))
	if cfg.Anonymous {
		a = union.NewFailOnError(a, anonymous.NewAuthenticator(nil))
	}

	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: cfg.SubjectAccessReviewClient,
		AllowCacheTTL:             orDefault(cfg.AuthorizedCacheTTL, DefaultAuthorizedCacheTTL),
		DenyCacheTTL:              orDefault(cfg.UnauthorizedCacheTTL, DefaultUnauthorizedCacheTTL),
		WebhookRetryBackoff:       &backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("kubelet API auth: %w", err)
	}
	return NewAuthFrom(a, authz, cfg.NodeName), nil
}

// WebhookRetryBackoff is the retry backoff of TokenReview and
// SubjectAccessReview calls, the apiserver's default one.
func WebhookRetryBackoff() wait.Backoff {
	return wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// NewAuthFrom combines an authenticator and an authorizer of the caller's
// choice into an Auth that maps requests with NodeRequestAttributes.
func NewAuthFrom(authn authenticator.Request, authz authorizer.Authorizer, nodeName string) Auth {
	return &nodeAuth{Request: authn, Authorizer: authz, nodeName: nodeName}
}

type nodeAuth struct {
	authenticator.Request
	authorizer.Authorizer
	nodeName string
}

func (a *nodeAuth) GetRequestAttributes(u user.Info, r *http.Request) authorizer.Attributes {
	return NodeRequestAttributes(a.nodeName, u, r)
}

// NodeRequestAttributes maps a kubelet API request to the attributes it is
// authorized with, as the kubelet does: resource "nodes" named nodeName,
// with a subresource by path (/stats/... is "stats", /metrics... "metrics",
// /logs/... "log", anything else "proxy") and a verb by method (GET and
// HEAD get, POST create, PUT update, PATCH patch, DELETE delete).
func NodeRequestAttributes(nodeName string, u user.Info, r *http.Request) authorizer.AttributesRecord {
	p := path.Clean("/" + r.URL.Path)
	subresource := "proxy"
	switch {
	case isSubpath(p, "/stats"):
		subresource = "stats"
	case isSubpath(p, "/metrics"):
		subresource = "metrics"
	case isSubpath(p, "/logs"):
		subresource = "log"
	}
	return authorizer.AttributesRecord{
		User:            u,
		Verb:            verbOf(r.Method),
		Namespace:       "",
		APIGroup:        "",
		APIVersion:      "v1",
		Resource:        "nodes",
		Subresource:     subresource,
		Name:            nodeName,
		ResourceRequest: true,
		Path:            r.URL.Path,
	}
}

// isSubpath reports whether p is prefix or below it.
func isSubpath(p, prefix string) bool {
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

func verbOf(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	default:
		return ""
	}
}

// WithAuth wraps h so that every request is authenticated (401
// Unauthorized if it cannot be) and authorized (403 Forbidden if denied)
// by a, except GET /healthz, which is always served. h sees the user in
// the request's context (k8s.io/apiserver/pkg/endpoints/request.UserFrom).
func WithAuth(h http.Handler, a Auth) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			h.ServeHTTP(w, r)
			return
		}
		ctx := r.Context()
		resp, ok, err := a.AuthenticateRequest(r)
		if err != nil {
			log.G(ctx).WithError(err).Debug("kubelet API: authentication failed")
		}
		if err != nil || !ok || resp == nil || resp.User == nil {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := a.GetRequestAttributes(resp.User, r)
		decision, reason, err := a.Authorize(ctx, attrs)
		if err != nil {
			msg := "Authorization error " + describe(attrs)
			log.G(ctx).WithError(err).Warn("kubelet API: " + msg)
			http.Error(w, msg, http.StatusInternalServerError)
			return
		}
		if decision != authorizer.DecisionAllow {
			log.G(ctx).WithField("reason", reason).Debug("kubelet API: forbidden " + describe(attrs))
			http.Error(w, "Forbidden "+describe(attrs), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r.WithContext(request.WithUser(ctx, resp.User)))
	})
}

// describe is how the kubelet names a request it refuses.
func describe(a authorizer.Attributes) string {
	name := ""
	if u := a.GetUser(); u != nil {
		name = u.GetName()
	}
	return fmt.Sprintf("(user=%s, verb=%s, resource=%s, subresource=%s)", name, a.GetVerb(), a.GetResource(), a.GetSubresource())
}
