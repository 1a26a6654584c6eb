package spanlog

import (
	"fmt"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// Attrs makes a tracing backend's attributes T out of fields with the
// backend's constructors, keeping the type of booleans and numbers;
// anything else is recorded as its fmt representation.
type Attrs[T any] struct {
	String  func(key, value string) T
	Bool    func(key string, value bool) T
	Int64   func(key string, value int64) T
	Float64 func(key string, value float64) T
}

// Of returns the attribute of one field.
func (a Attrs[T]) Of(key string, value any) T {
	switch v := value.(type) {
	case string:
		return a.String(key, v)
	case bool:
		return a.Bool(key, v)
	case int:
		return a.Int64(key, int64(v))
	case int32:
		return a.Int64(key, int64(v))
	case int64:
		return a.Int64(key, v)
	case float64:
		return a.Float64(key, v)
	}
	return a.String(key, fmt.Sprint(value))
}

// All returns the attributes of fields, in no particular order.
func (a Attrs[T]) All(fields log.Fields) []T {
	out := make([]T, 0, len(fields))
	for k, v := range fields {
		out = append(out, a.Of(k, v))
	}
	return out
}
