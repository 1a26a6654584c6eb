package volume

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// DefaultTokenMaxAge is the age at which the kubelet renews a projected
// service-account token however long it is valid.
const DefaultTokenMaxAge = 24 * time.Hour

// Token is a service-account token issued for a pod.
type Token struct {
	Token     string
	ExpiresAt time.Time
	// RefreshAt is when it is due for renewal: at 80% of its lifetime, or
	// once it is the Tokens' maximum age, whichever comes first.
	RefreshAt time.Time
}

// Tokens issues service-account tokens bound to pods through the
// TokenRequest API (serviceaccounts/token create), and hands out the same
// token until it is due for renewal, as the kubelet's token manager does.
// It is safe for concurrent use.
type Tokens struct {
	client corev1client.ServiceAccountsGetter
	maxAge time.Duration
	now    func() time.Time

	mu sync.Mutex
	// byPod holds a slice, not a map: a pod has one or two projections,
	// and a map per pod costs near a kilobyte at 10,000 pods.
	byPod map[types.UID][]cachedToken
}

type cachedToken struct {
	key tokenKey
	tok Token
}

// tokenKey is what makes two projections of one pod need different tokens.
type tokenKey struct {
	serviceAccount, audience string
	expirationSeconds        int64
}

func newTokenKey(pod *corev1.Pod, audience string, expirationSeconds int64) tokenKey {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	return tokenKey{serviceAccount: sa, audience: audience, expirationSeconds: expirationSeconds}
}

// NewTokens returns a token source using client. maxAge is the age at which
// a token is renewed even if it is valid much longer; 0 means
// DefaultTokenMaxAge.
func NewTokens(client corev1client.ServiceAccountsGetter, maxAge time.Duration) *Tokens {
	if maxAge <= 0 {
		maxAge = DefaultTokenMaxAge
	}
	return &Tokens{client: client, maxAge: maxAge, now: time.Now, byPod: map[types.UID][]cachedToken{}}
}

// Get returns a token of pod's service account bound to pod (it stops
// being valid when the pod is deleted), for audience (empty: the API
// server's own) and valid for about expirationSeconds. A cached token is
// returned until its RefreshAt.
func (t *Tokens) Get(ctx context.Context, pod *corev1.Pod, audience string, expirationSeconds int64) (Token, error) {
	key := newTokenKey(pod, audience, expirationSeconds)
	t.mu.Lock()
	tok, ok := t.cached(pod.UID, key)
	t.mu.Unlock()
	if ok && t.now().Before(tok.RefreshAt) {
		return tok, nil
	}

	tok, err := t.request(ctx, refOf(pod), key)
	if err != nil {
		return Token{}, err
	}
	t.mu.Lock()
	t.store(pod.UID, key, tok)
	t.mu.Unlock()
	return tok, nil
}

// podRef is what a token is bound to.
type podRef struct {
	namespace, name string
	uid             types.UID
}

func refOf(pod *corev1.Pod) podRef {
	return podRef{namespace: pod.Namespace, name: pod.Name, uid: pod.UID}
}

// request asks the API server for a token of key's service account bound
// to pod.
func (t *Tokens) request(ctx context.Context, pod podRef, key tokenKey) (Token, error) {
	expirationSeconds := key.expirationSeconds
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &expirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.name, UID: pod.uid},
	}}
	if key.audience != "" {
		req.Spec.Audiences = []string{key.audience}
	}
	requested := t.now()
	issued, err := t.client.ServiceAccounts(pod.namespace).CreateToken(ctx, key.serviceAccount, req, metav1.CreateOptions{})
	if err != nil {
		return Token{}, fmt.Errorf("requesting a token for service account %s/%s: %w", pod.namespace, key.serviceAccount, err)
	}
	return t.token(issued, requested), nil
}

// OnRead returns a source of the token Get would return, which requests
// it only when it is read. The source keeps its token itself, not t, so it
// needs no Forget: it goes when its holder drops it.
func (t *Tokens) OnRead(pod *corev1.Pod, audience string, expirationSeconds int64) *TokenSource {
	return &TokenSource{tokens: t, pod: refOf(pod), key: newTokenKey(pod, audience, expirationSeconds)}
}

// TokenSource is one projected service-account token of a pod, requested
// from the API server when it is first read and again once it is due for
// renewal: what a reader sees is what a kubelet's file would hold at that
// moment. It is safe for concurrent use; concurrent readers share one
// request.
type TokenSource struct {
	tokens *Tokens
	pod    podRef
	key    tokenKey

	mu  sync.Mutex
	tok Token
}

// Token returns the current token, requesting one if there is none yet or
// the last is due for renewal.
func (s *TokenSource) Token(ctx context.Context) (Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok.Token != "" && s.tokens.now().Before(s.tok.RefreshAt) {
		return s.tok, nil
	}
	tok, err := s.tokens.request(ctx, s.pod, s.key)
	if err != nil {
		return Token{}, err
	}
	s.tok = tok
	return tok, nil
}

// cached returns the pod's token for key; t.mu must be held.
func (t *Tokens) cached(uid types.UID, key tokenKey) (Token, bool) {
	for _, c := range t.byPod[uid] {
		if c.key == key {
			return c.tok, true
		}
	}
	return Token{}, false
}

// store caches the pod's token for key; t.mu must be held.
func (t *Tokens) store(uid types.UID, key tokenKey, tok Token) {
	list := t.byPod[uid]
	for i := range list {
		if list[i].key == key {
			list[i].tok = tok
			return
		}
	}
	t.byPod[uid] = append(list, cachedToken{key, tok})
}

// token computes when a token issued at requested is due: its lifetime
// runs from then to its expiry.
func (t *Tokens) token(tr *authenticationv1.TokenRequest, requested time.Time) Token {
	exp := tr.Status.ExpirationTimestamp.Time
	lifetime := exp.Sub(requested)
	refresh := requested.Add(min(lifetime*8/10, t.maxAge))
	return Token{Token: tr.Status.Token, ExpiresAt: exp, RefreshAt: refresh}
}

// Forget drops the tokens of the pod with uid, once it is gone.
func (t *Tokens) Forget(uid types.UID) {
	t.mu.Lock()
	delete(t.byPod, uid)
	t.mu.Unlock()
}
