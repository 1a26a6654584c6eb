package stage

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/itchyny/gojq"
)

// evalTimeout bounds one expression's run: a stage file's jq may loop
// (`repeat(.)`), and the node's pods must not wait on it.
const evalTimeout = 100 * time.Millisecond

// maxResults bounds what one expression yields: `range(1e9)` must not hold
// a billion values.
const maxResults = 1024

// query is a compiled jq expression.
type query struct {
	src  string
	code *gojq.Code
}

// compileQuery compiles src; the error quotes it.
func compileQuery(src string) (*query, error) {
	if src == "" {
		return nil, fmt.Errorf("empty expression")
	}
	q, err := gojq.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("expression %q: %v", src, err)
	}
	code, err := gojq.Compile(q)
	if err != nil {
		return nil, fmt.Errorf("expression %q: %v", src, err)
	}
	return &query{src: src, code: code}, nil
}

// run yields the expression's non-null values on obj, a JSON value as
// encoding/json decodes it into an any. As in kwok, an expression that
// fails on obj (indexing a string, say) yields nothing; one that runs out
// of time or values is an error.
func (q *query) run(obj any) ([]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), evalTimeout)
	defer cancel()
	var out []any
	iter := q.code.RunWithContext(ctx, obj)
	for {
		v, ok := iter.Next()
		if !ok {
			return out, nil
		}
		if _, ok := v.(error); ok {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("expression %q: ran for more than %s", q.src, evalTimeout)
			}
			return nil, nil
		}
		if v == nil {
			continue
		}
		if len(out) == maxResults {
			return nil, fmt.Errorf("expression %q: yields more than %d values", q.src, maxResults)
		}
		out = append(out, v)
	}
}

// operator is a selector's relation between a field and its values.
type operator string

const (
	opIn           operator = "In"
	opNotIn        operator = "NotIn"
	opExists       operator = "Exists"
	opDoesNotExist operator = "DoesNotExist"
)

// requirement is one match expression.
type requirement struct {
	q      *query
	op     operator
	values []string
}

func newRequirement(key, op string, values []string) (*requirement, error) {
	q, err := compileQuery(key)
	if err != nil {
		return nil, err
	}
	switch o := operator(op); o {
	case opIn, opNotIn:
		if len(values) == 0 {
			return nil, fmt.Errorf("key %q: operator %s needs values", key, op)
		}
	case opExists, opDoesNotExist:
		if len(values) != 0 {
			return nil, fmt.Errorf("key %q: operator %s takes no values", key, op)
		}
	default:
		return nil, fmt.Errorf("key %q: unknown operator %q (In, NotIn, Exists, DoesNotExist)", key, op)
	}
	return &requirement{q: q, op: operator(op), values: values}, nil
}

// matches tells whether obj meets the requirement: In when one of the
// expression's values is one of the strings, Exists when it yields a value.
func (r *requirement) matches(obj any) (bool, error) {
	got, err := r.q.run(obj)
	if err != nil {
		return false, err
	}
	switch r.op {
	case opIn:
		return r.anyIn(got), nil
	case opNotIn:
		return !r.anyIn(got), nil
	case opExists:
		return len(got) > 0, nil
	}
	return len(got) == 0, nil
}

func (r *requirement) anyIn(got []any) bool {
	for _, v := range got {
		if s, ok := scalarString(v); ok && slices.Contains(r.values, s) {
			return true
		}
	}
	return false
}

// scalarString writes a string, boolean or whole number as a selector's
// values are written.
func scalarString(v any) (string, bool) {
	switch t := v.(type) {
	case string:
		return t, true
	case bool:
		return strconv.FormatBool(t), true
	case int:
		return strconv.Itoa(t), true
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1<<53 {
			return strconv.FormatInt(int64(t), 10), true
		}
	}
	return "", false
}

// valueFrom is a value taken from the object by an expression, with the
// value written in the stage as the default.
type valueFrom struct {
	q *query
}

func newValueFrom(src *expressionFrom) (*valueFrom, error) {
	if src == nil {
		return nil, nil
	}
	expr := src.ExpressionFrom
	switch {
	case src.CEL != nil:
		return nil, fmt.Errorf("cel: CEL expressions are not supported by the mock; use jq")
	case src.JQ != nil && expr != "":
		return nil, fmt.Errorf("expressionFrom and jq: give one")
	case src.JQ != nil:
		expr = src.JQ.Expression
	}
	q, err := compileQuery(expr)
	if err != nil {
		return nil, err
	}
	return &valueFrom{q: q}, nil
}

// first is the expression's first value on obj; ok is false when there is
// none.
func (v *valueFrom) first(obj any) (any, bool, error) {
	got, err := v.q.run(obj)
	if err != nil || len(got) == 0 {
		return nil, false, err
	}
	return got[0], true, nil
}
