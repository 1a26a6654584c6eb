// Package errdefs defines the kinds of error the node controllers understand.
// A provider returns them (or wraps them) so that the controllers can tell,
// for example, a pod that is gone from the provider from a provider outage.
//
//	if _, ok := pods[key]; !ok {
//		return nil, errdefs.NotFoundf("pod %s is not known to the provider", key)
//	}
//
// Errors of other packages can take part too by implementing the marker
// methods NotFound() bool, InvalidInput() bool or NotImplemented() bool.
package errdefs

import (
	"errors"
	"fmt"
)

// ErrNotFound is implemented by errors that mean "the thing does not exist".
type ErrNotFound interface {
	NotFound() bool
	error
}

// ErrInvalidInput is implemented by errors that mean "the request is
// malformed and retrying it unchanged cannot succeed".
type ErrInvalidInput interface {
	InvalidInput() bool
	error
}

// ErrNotImplemented is implemented by errors that mean "the provider does
// not serve this feature" (the kubelet API answers 501 Not Implemented).
type ErrNotImplemented interface {
	NotImplemented() bool
	error
}

type notFoundError struct{ error }

func (notFoundError) NotFound() bool  { return true }
func (e notFoundError) Unwrap() error { return e.error }

type invalidInputError struct{ error }

func (invalidInputError) InvalidInput() bool { return true }
func (e invalidInputError) Unwrap() error    { return e.error }

// NotFound returns an error of kind NotFound with the given message.
func NotFound(msg string) error { return notFoundError{errors.New(msg)} }

// NotFoundf is NotFound with a format string.
func NotFoundf(format string, args ...any) error { return notFoundError{fmt.Errorf(format, args...)} }

// AsNotFound marks err as of kind NotFound, keeping its message and chain.
// It returns nil for a nil err.
func AsNotFound(err error) error {
	if err == nil {
		return nil
	}
	return notFoundError{err}
}

// IsNotFound reports whether err, or any error it wraps, is of kind NotFound.
func IsNotFound(err error) bool {
	var e ErrNotFound
	return errors.As(err, &e) && e.NotFound()
}

// InvalidInput returns an error of kind InvalidInput with the given message.
func InvalidInput(msg string) error { return invalidInputError{errors.New(msg)} }

// InvalidInputf is InvalidInput with a format string.
func InvalidInputf(format string, args ...any) error {
	return invalidInputError{fmt.Errorf(format, args...)}
}

// AsInvalidInput marks err as of kind InvalidInput, keeping its message and
// chain. It returns nil for a nil err.
func AsInvalidInput(err error) error {
	if err == nil {
		return nil
	}
	return invalidInputError{err}
}

// IsInvalidInput reports whether err, or any error it wraps, is of kind
// InvalidInput.
func IsInvalidInput(err error) bool {
	var e ErrInvalidInput
	return errors.As(err, &e) && e.InvalidInput()
}

type notImplementedError struct{ error }

func (notImplementedError) NotImplemented() bool { return true }
func (e notImplementedError) Unwrap() error      { return e.error }

// NotImplemented returns an error of kind NotImplemented with the given
// message, which should name the feature.
func NotImplemented(msg string) error { return notImplementedError{errors.New(msg)} }

// NotImplementedf is NotImplemented with a format string.
func NotImplementedf(format string, args ...any) error {
	return notImplementedError{fmt.Errorf(format, args...)}
}

// IsNotImplemented reports whether err, or any error it wraps, is of kind
// NotImplemented.
func IsNotImplemented(err error) bool {
	var e ErrNotImplemented
	return errors.As(err, &e) && e.NotImplemented()
}
