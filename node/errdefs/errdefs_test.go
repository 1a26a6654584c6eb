package errdefs

import (
	"errors"
	"fmt"
	"testing"
)

type custom struct{}

func (custom) Error() string  { return "custom" }
func (custom) NotFound() bool { return true }

func TestKinds(t *testing.T) {
	base := errors.New("boom")
	cases := []struct {
		name              string
		err               error
		notFound, invalid bool
	}{
		{"nil", nil, false, false},
		{"plain", base, false, false},
		{"NotFound", NotFound("x"), true, false},
		{"NotFoundf", NotFoundf("pod %s", "a"), true, false},
		{"AsNotFound", AsNotFound(base), true, false},
		{"wrapped NotFound", fmt.Errorf("ctx: %w", NotFound("x")), true, false},
		{"InvalidInput", InvalidInput("x"), false, true},
		{"InvalidInputf", InvalidInputf("bad %d", 1), false, true},
		{"AsInvalidInput", AsInvalidInput(base), false, true},
		{"wrapped InvalidInput", fmt.Errorf("ctx: %w", InvalidInput("x")), false, true},
		{"foreign marker", fmt.Errorf("ctx: %w", custom{}), true, false},
	}
	for _, c := range cases {
		if got := IsNotFound(c.err); got != c.notFound {
			t.Errorf("%s: IsNotFound = %v, want %v", c.name, got, c.notFound)
		}
		if got := IsInvalidInput(c.err); got != c.invalid {
			t.Errorf("%s: IsInvalidInput = %v, want %v", c.name, got, c.invalid)
		}
	}
	if AsNotFound(nil) != nil || AsInvalidInput(nil) != nil {
		t.Error("marking a nil error must stay nil")
	}
	if err := AsNotFound(base); !errors.Is(err, base) || err.Error() != "boom" {
		t.Errorf("AsNotFound lost the chain or message: %v", err)
	}
	if got := NotFoundf("pod %s", "a").Error(); got != "pod a" {
		t.Errorf("message = %q", got)
	}
}

func TestNotImplemented(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("boom"), false},
		{NotFound("x"), false},
		{NotImplemented("exec"), true},
		{fmt.Errorf("ctx: %w", NotImplementedf("%s", "attach")), true},
	} {
		if got := IsNotImplemented(c.err); got != c.want {
			t.Errorf("IsNotImplemented(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if IsNotFound(NotImplemented("x")) || IsInvalidInput(NotImplemented("x")) {
		t.Error("NotImplemented must be of no other kind")
	}
	if got := NotImplementedf("%s is not served", "attach").Error(); got != "attach is not served" {
		t.Errorf("message = %q", got)
	}
}
