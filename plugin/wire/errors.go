package wire

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// ToStatus is err as the gRPC status a plugin answers: the errdefs kinds
// NotFound and InvalidInput become NOT_FOUND and INVALID_ARGUMENT, a context
// that ended becomes CANCELED or DEADLINE_EXCEEDED, and anything else
// UNKNOWN, the message kept. nil stays nil.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := codes.Unknown
	switch {
	case errdefs.IsNotFound(err):
		code = codes.NotFound
	case errdefs.IsInvalidInput(err):
		code = codes.InvalidArgument
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return status.Error(code, err.Error())
}

// FromStatus is the inverse of ToStatus on the daemon's side: NOT_FOUND and
// INVALID_ARGUMENT become the errdefs kinds, with the plugin's message;
// other codes keep the status error, its message prefixed with call so the
// daemon's logs say which call failed. nil stays nil.
func FromStatus(call string, err error) error {
	if err == nil {
		return nil
	}
	s, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("plugin: %s: %w", call, err)
	}
	switch s.Code() {
	case codes.NotFound:
		return errdefs.NotFound(s.Message())
	case codes.InvalidArgument:
		return errdefs.InvalidInput(s.Message())
	case codes.Unavailable:
		return &callError{call: call, what: "plugin unavailable", err: err}
	}
	return &callError{call: call, what: "plugin", err: err}
}

// callError is a failed call to the plugin.
type callError struct {
	call, what string
	err        error
}

func (e *callError) Error() string {
	return e.what + ": " + e.call + ": " + status.Convert(e.err).Message()
}

// Unwrap keeps the gRPC status reachable (status.FromError, errors.Is of
// context errors through it).
func (e *callError) Unwrap() error { return e.err }
