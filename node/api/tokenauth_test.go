package api_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"

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
