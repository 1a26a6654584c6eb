//go:build vk_strategicpatch

// Package smpatch builds the strategic merge patch between two values of one
// Kubernetes API type. Under the build tag vk_strategicpatch it is
// apimachinery's: both values marshalled, then
// strategicpatch.CreateTwoWayMergePatch, to compare with the default build's
// diff by the Go types in the bench.
package smpatch

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// ErrUnsupported reports values whose patch this package does not build:
// values that are not structs.
var ErrUnsupported = errors.New("smpatch: field kind not supported")

// Diff returns the members of the strategic merge patch that turns *old
// into *new, as a JSON object; "{}" when nothing a patch can carry changed.
func Diff[T any](old, new *T) ([]byte, error) {
	if old == nil || new == nil {
		return nil, errors.New("smpatch: a nil value has no patch")
	}
	if t := reflect.TypeFor[T](); t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: %s is not a struct", ErrUnsupported, t)
	}
	o, err := json.Marshal(old)
	if err != nil {
		return nil, err
	}
	n, err := json.Marshal(new)
	if err != nil {
		return nil, err
	}
	var schema T
	return strategicpatch.CreateTwoWayMergePatch(o, n, schema)
}
