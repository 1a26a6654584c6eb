package usage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultCostLimit is the cost limit of one evaluation: kwok's published
// expressions cost under a hundred, and an evaluation runs per container
// and scrape, so an expression that costs more is a mistake (a loop over
// a list nested in another) rather than a simulation.
const DefaultCostLimit = 100_000

// DefaultTimeout bounds one evaluation's time, should a function's cost
// be more than cel-go's estimate.
const DefaultTimeout = 100 * time.Millisecond

// maxExpressionBytes bounds an expression's source.
const maxExpressionBytes = 16 << 10

// The variables an expression sees.
const (
	varPod       = "pod"
	varNode      = "node"
	varContainer = "container"
)

// metricOnly are kwok's functions that only its Metric objects may call:
// they read the usage these objects give.
var metricOnly = []string{"Usage", "CumulativeUsage"}

// evaluator holds the CEL environment and the evaluation's bounds.
type evaluator struct {
	env     *cel.Env
	limit   uint64
	timeout time.Duration
}

func newEvaluator(opts Options) (*evaluator, error) {
	ev := &evaluator{limit: opts.CostLimit, timeout: opts.Timeout}
	if ev.limit == 0 {
		ev.limit = DefaultCostLimit
	}
	if ev.timeout <= 0 {
		ev.timeout = DefaultTimeout
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	env, err := newEnv(now)
	if err != nil {
		return nil, fmt.Errorf("usage expressions: %w", err)
	}
	ev.env = env
	return ev, nil
}

// newEnv declares kwok's variables and functions. Objects are dyn: they
// are the JSON of the API objects, so a field is what kubectl get -o json
// shows.
func newEnv(now func() time.Time) (*cel.Env, error) {
	dyn := []*cel.Type{cel.DynType}
	since := cel.UnaryBinding(func(obj ref.Val) ref.Val {
		created, err := creationTime(obj)
		if err != nil {
			return types.NewErr("SinceSecond: %v", err)
		}
		return types.Double(now().Sub(created).Seconds())
	})
	opts := []cel.EnvOption{
		cel.Variable(varPod, cel.DynType),
		cel.Variable(varNode, cel.DynType),
		cel.Variable(varContainer, cel.DynType),
		cel.ParserExpressionSizeLimit(maxExpressionBytes),
		cel.Function("Now", cel.Overload("Now", nil, cel.TimestampType,
			cel.FunctionBinding(func(...ref.Val) ref.Val { return types.Timestamp{Time: now()} }))),
		cel.Function("Rand", cel.Overload("Rand", nil, cel.DoubleType,
			cel.FunctionBinding(func(...ref.Val) ref.Val { return types.Double(rand.Float64()) }))), //nolint:gosec // G404: simulated usage, not a secret
		cel.Function("SinceSecond",
			cel.Overload("SinceSecond_dyn", dyn, cel.DoubleType, since),
			cel.MemberOverload("dyn_SinceSecond", dyn, cel.DoubleType, since)),
		cel.Function("UnixSecond",
			cel.Overload("UnixSecond_timestamp", []*cel.Type{cel.TimestampType}, cel.DoubleType, cel.UnaryBinding(unixSecond)),
			cel.Overload("UnixSecond_string", []*cel.Type{cel.StringType}, cel.DoubleType, cel.UnaryBinding(unixSecond)),
			cel.MemberOverload("timestamp_UnixSecond", []*cel.Type{cel.TimestampType}, cel.DoubleType, cel.UnaryBinding(unixSecond)),
			cel.MemberOverload("string_UnixSecond", []*cel.Type{cel.StringType}, cel.DoubleType, cel.UnaryBinding(unixSecond))),
		cel.Function("Quantity",
			cel.Overload("Quantity_string", []*cel.Type{cel.StringType}, cel.DoubleType, cel.UnaryBinding(quantity)),
			cel.MemberOverload("string_Quantity", []*cel.Type{cel.StringType}, cel.DoubleType, cel.UnaryBinding(quantity))),
	}
	// Declared so that a call is found and refused by name, not
	// reported as an unknown function.
	for _, name := range metricOnly {
		refused := cel.FunctionBinding(func(...ref.Val) ref.Val { return types.NewErr("%s is for Metric objects", name) })
		opts = append(opts, cel.Function(name,
			cel.Overload(name+"_dyn_string", []*cel.Type{cel.DynType, cel.StringType}, cel.DoubleType, refused),
			cel.Overload(name+"_dyn_string_string", []*cel.Type{cel.DynType, cel.StringType, cel.StringType}, cel.DoubleType, refused),
			cel.MemberOverload("dyn_"+name+"_string", []*cel.Type{cel.DynType, cel.StringType}, cel.DoubleType, refused),
			cel.MemberOverload("dyn_"+name+"_string_string", []*cel.Type{cel.DynType, cel.StringType, cel.StringType}, cel.DoubleType, refused)))
	}
	return cel.NewEnv(opts...)
}

// creationTime is an object's metadata.creationTimestamp.
func creationTime(obj ref.Val) (time.Time, error) {
	m, ok := obj.(traits.Mapper)
	if !ok {
		return time.Time{}, fmt.Errorf("want an object (pod or node), got %s", obj.Type().TypeName())
	}
	meta, ok := m.Find(types.String("metadata"))
	if !ok {
		return time.Time{}, errors.New("the object has no metadata")
	}
	mm, ok := meta.(traits.Mapper)
	if !ok {
		return time.Time{}, errors.New("metadata is not an object")
	}
	ts, ok := mm.Find(types.String("creationTimestamp"))
	if !ok {
		return time.Time{}, errors.New("the object has no metadata.creationTimestamp")
	}
	return timeOf(ts)
}

// timeOf is a timestamp, or a string in RFC 3339 as JSON holds one.
func timeOf(v ref.Val) (time.Time, error) {
	switch t := v.(type) {
	case types.Timestamp:
		return t.Time, nil
	case types.String:
		return time.Parse(time.RFC3339, string(t))
	}
	return time.Time{}, fmt.Errorf("want a time, got %s", v.Type().TypeName())
}

func unixSecond(v ref.Val) ref.Val {
	t, err := timeOf(v)
	if err != nil {
		return types.NewErr("UnixSecond: %v", err)
	}
	return types.Double(float64(t.UnixNano()) / 1e9)
}

func quantity(v ref.Val) ref.Val {
	s, ok := v.(types.String)
	if !ok {
		return types.NewErr("Quantity: want a string, got %s", v.Type().TypeName())
	}
	q, err := resource.ParseQuantity(string(s))
	if err != nil {
		return types.NewErr("Quantity(%q): %v", string(s), err)
	}
	return types.Double(q.AsApproximateFloat64())
}

// Value is one resource's usage: a constant or a compiled expression.
type Value struct {
	// object names the usage object, for Events.
	object string
	// constant is the figure when prg is nil: nanocores for cpu, bytes
	// for memory.
	constant uint64
	prg      cel.Program
	cpu      bool
	ev       *evaluator
}

// value compiles a resource's value; errors follow the field's name.
func (ev *evaluator) value(res string, v valueDoc) (*Value, error) {
	out := &Value{cpu: res == ResourceCPU, ev: ev}
	// kwok: value wins over expression when both are set.
	if v.Value != nil {
		if v.Value.Sign() < 0 {
			return nil, fmt.Errorf(".value: %s is negative", v.Value)
		}
		if out.cpu {
			out.constant = uint64(v.Value.ScaledValue(resource.Nano))
		} else {
			out.constant = uint64(v.Value.Value())
		}
		return out, nil
	}
	if v.Expression == nil {
		return nil, fmt.Errorf(": want value or expression")
	}
	expr := *v.Expression
	if len(expr) > maxExpressionBytes {
		return nil, fmt.Errorf(".expression: longer than %d bytes", maxExpressionBytes)
	}
	ast, iss := ev.env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf(".expression: %s", oneLine(iss.Err().Error()))
	}
	for _, r := range ast.NativeRep().ReferenceMap() {
		for _, name := range metricOnly {
			for _, id := range r.OverloadIDs {
				if id == name+"_dyn_string" || id == name+"_dyn_string_string" || id == "dyn_"+name+"_string" || id == "dyn_"+name+"_string_string" {
					return nil, fmt.Errorf(".expression: %s() reads the usage these objects give: kwok allows it in Metric objects only", name)
				}
			}
		}
	}
	switch t := ast.OutputType(); {
	case t.IsExactType(cel.DoubleType), t.IsExactType(cel.IntType), t.IsExactType(cel.UintType), t.IsExactType(cel.DynType):
	default:
		return nil, fmt.Errorf(".expression: gives %s, want a number (Quantity(\"100m\") is one)", t)
	}
	prg, err := ev.env.Program(ast,
		cel.CostLimit(ev.limit),
		cel.InterruptCheckFrequency(100),
		cel.EvalOptions(cel.OptTrackCost))
	if err != nil {
		return nil, fmt.Errorf(".expression: %s", oneLine(err.Error()))
	}
	out.prg = prg
	return out, nil
}

// IsExpression tells whether the value is an expression, which reads the
// variables, rather than a constant; false for nil.
func (v *Value) IsExpression() bool { return v != nil && v.prg != nil }

// Object names the usage object the value is of: "ClusterResourceUsage
// name" or "ResourceUsage namespace/name".
func (v *Value) Object() string { return v.object }

// Vars are what an expression sees: the JSON of the pod, its node and the
// container.
type Vars struct {
	Pod, Node, Container map[string]any
}

// CostLimitError is an evaluation cel-go cut off at the cost limit, or at
// the deadline.
type CostLimitError struct {
	// Object names the usage object.
	Object string
	// Limit is the cost limit; Timeout the deadline.
	Limit   uint64
	Timeout time.Duration
}

func (e *CostLimitError) Error() string {
	return fmt.Sprintf("%s: expression cut off at cel-go's cost limit %d (or %s)", e.Object, e.Limit, e.Timeout)
}

// Eval is the usage now: nanocores for cpu, bytes for memory. A value
// that is not a finite number at least zero is an error.
func (v *Value) Eval(ctx context.Context, vars Vars) (uint64, error) {
	if v.prg == nil {
		return v.constant, nil
	}
	ctx, cancel := context.WithTimeout(ctx, v.ev.timeout)
	defer cancel()
	out, _, err := v.prg.ContextEval(ctx, map[string]any{varPod: vars.Pod, varNode: vars.Node, varContainer: vars.Container})
	if err != nil {
		var cancelled interpreter.EvalCancelledError
		if errors.As(err, &cancelled) || ctx.Err() != nil {
			return 0, &CostLimitError{Object: v.object, Limit: v.ev.limit, Timeout: v.ev.timeout}
		}
		return 0, fmt.Errorf("%s: %s", v.object, oneLine(err.Error()))
	}
	var f float64
	switch n := out.(type) {
	case types.Double:
		f = float64(n)
	case types.Int:
		f = float64(n)
	case types.Uint:
		f = float64(n)
	default:
		return 0, fmt.Errorf("%s: expression gave %s, want a number", v.object, out.Type().TypeName())
	}
	if v.cpu {
		f *= 1e9 // cores to nanocores
	}
	switch {
	case math.IsNaN(f), f < 0:
		return 0, fmt.Errorf("%s: expression gave %v, want a number at least 0", v.object, out)
	case f >= math.MaxUint64:
		return math.MaxUint64, nil
	}
	return uint64(f), nil
}
