package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// tokenAuth is the tests' authenticator and authorizer: a bearer token
// listed in users authenticates as the user of that name, the token
// "broken" fails as a TokenReview that errs does, any other is no
// credential; allow decides each authorization (an error is the
// SubjectAccessReview's failure), and what was asked is recorded.
type tokenAuth struct {
	users []string
	allow func(authorizer.Attributes) (bool, error)

	mu    sync.Mutex
	asked []authorizer.Attributes
}

func (a *tokenAuth) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case ok && tok == "broken":
		return nil, false, errors.New("token review failed")
	case ok && slices.Contains(a.users, tok):
		return &authenticator.Response{User: &user.DefaultInfo{Name: tok}}, true, nil
	}
	return nil, false, nil
}

func (a *tokenAuth) Authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	a.mu.Lock()
	a.asked = append(a.asked, attrs)
	a.mu.Unlock()
	allowed, err := a.allow(attrs)
	switch {
	case err != nil:
		return authorizer.DecisionNoOpinion, "", err
	case allowed:
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionDeny, "the test's policy denies it", nil
}

// last is the attributes of the last authorization.
func (a *tokenAuth) last() authorizer.Attributes {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.asked) == 0 {
		return nil
	}
	return a.asked[len(a.asked)-1]
}

// authCase is a request by a bearer token's holder (none if token is
// empty) and the reply it must get: its status and a part of its body.
type authCase struct {
	token, method, target string
	code                  int
	body                  string
}

// check sends the request to h and fails the test when the reply is not
// the one wanted.
func (r authCase) check(t *testing.T, h http.Handler) {
	t.Helper()
	if code, body := as(h, r.token, r.method, r.target); code != r.code || !strings.Contains(body, r.body) {
		t.Errorf("%s %s as %q: %d %q, want %d %q", r.method, r.target, r.token, code, body, r.code, r.body)
	}
}

// as does a request with the token (none if empty) and returns the status
// and body.
func as(h http.Handler, token, method, target string) (int, string) {
	r := httptest.NewRequest(method, target, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec.Code, rec.Body.String()
}
