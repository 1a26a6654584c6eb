// Package stage runs kwok's Stage objects (kwok.x-k8s.io/v1alpha1, kind
// Stage, as kwok v0.8.0 defines them) against Pods and Nodes: a stage whose
// selector matches an object is chosen by weight, waits its delay and then
// takes its steps (an Event, finalizers, a status patch from a Go template,
// delete). The package decides; the mock provider acts (see Steps).
//
// Field expressions (selectors, weightFrom, durationFrom) are jq, run by
// github.com/itchyny/gojq; status templates are text/template with the
// sprig functions and kwok's own (Now, Quote, YAML, NodeIP, PodIPWith, ...).
package stage

// The API's identity: the only apiVersion and kind a stage file holds.
const (
	// APIVersion is kwok's API group and version.
	APIVersion = "kwok.x-k8s.io/v1alpha1"
	// KindStage is the kind of a Stage.
	KindStage = "Stage"
)

// These are kwok's v1alpha1 fields, as its documentation and types name
// them; the decoding is strict, so a field not listed is an error.

// document is one Stage, or a list of them (kind StageList or List).
type document struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   ObjectMeta   `json:"metadata"`
	Spec       *stageSpec   `json:"spec,omitempty"`
	Status     *stageStatus `json:"status,omitempty"`
}

// ObjectMeta is the metadata a kwok object in a file may carry: what
// kubectl get -o yaml prints is accepted, so a file saved from a cluster
// loads.
type ObjectMeta struct {
	Name            string            `json:"name"`
	Namespace       string            `json:"namespace,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	Annotations     map[string]string `json:"annotations,omitempty"`
	UID             string            `json:"uid,omitempty"`
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Generation      int64             `json:"generation,omitempty"`
	// CreationTimestamp is kept as written: kubectl get -o yaml prints it.
	CreationTimestamp any   `json:"creationTimestamp,omitempty"`
	ManagedFields     []any `json:"managedFields,omitempty"`
}

// stageStatus is what the API server keeps of a Stage; the mock ignores it.
type stageStatus struct {
	Conditions []any `json:"conditions,omitempty"`
}

type stageSpec struct {
	ResourceRef        resourceRef     `json:"resourceRef"`
	Selector           *selector       `json:"selector,omitempty"`
	Weight             int64           `json:"weight,omitempty"`
	WeightFrom         *expressionFrom `json:"weightFrom,omitempty"`
	Delay              *delay          `json:"delay,omitempty"`
	Next               *next           `json:"next,omitempty"`
	ImmediateNextStage *bool           `json:"immediateNextStage,omitempty"`
	Steps              []step          `json:"steps,omitempty"`
}

type resourceRef struct {
	APIGroup string `json:"apiGroup,omitempty"`
	Kind     string `json:"kind"`
}

type selector struct {
	MatchLabels      map[string]string `json:"matchLabels,omitempty"`
	MatchAnnotations map[string]string `json:"matchAnnotations,omitempty"`
	MatchExpressions []matchExpression `json:"matchExpressions,omitempty"`
}

// matchExpression is a requirement on a field expression: the older form
// (key, operator, values) or the same under jq. CEL is kwok's too; the
// mock refuses it by name.
type matchExpression struct {
	Key      string      `json:"key,omitempty"`
	Operator string      `json:"operator,omitempty"`
	Values   []string    `json:"values,omitempty"`
	JQ       *selectorJQ `json:"jq,omitempty"`
	CEL      *exprSource `json:"cel,omitempty"`
}

type selectorJQ struct {
	Key      string   `json:"key,omitempty"`
	Operator string   `json:"operator,omitempty"`
	Values   []string `json:"values,omitempty"`
}

type exprSource struct {
	Expression string `json:"expression,omitempty"`
}

// expressionFrom is where a value comes from: expressionFrom (jq) or jq.
type expressionFrom struct {
	ExpressionFrom string      `json:"expressionFrom,omitempty"`
	JQ             *exprSource `json:"jq,omitempty"`
	CEL            *exprSource `json:"cel,omitempty"`
}

type delay struct {
	DurationMilliseconds       *int64          `json:"durationMilliseconds,omitempty"`
	DurationFrom               *expressionFrom `json:"durationFrom,omitempty"`
	JitterDurationMilliseconds *int64          `json:"jitterDurationMilliseconds,omitempty"`
	JitterDurationFrom         *expressionFrom `json:"jitterDurationFrom,omitempty"`
}

type next struct {
	Event             *Event         `json:"event,omitempty"`
	Finalizers        *finalizers    `json:"finalizers,omitempty"`
	Delete            bool           `json:"delete,omitempty"`
	Patches           []patch        `json:"patches,omitempty"`
	StatusTemplate    string         `json:"statusTemplate,omitempty"`
	StatusSubresource *string        `json:"statusSubresource,omitempty"`
	StatusPatchAs     *impersonation `json:"statusPatchAs,omitempty"`
}

type step struct {
	Patch      *patch      `json:"patch,omitempty"`
	Event      *Event      `json:"event,omitempty"`
	Finalizers *finalizers `json:"finalizers,omitempty"`
	Delete     bool        `json:"delete,omitempty"`
	Apply      any         `json:"apply,omitempty"`
}

type patch struct {
	Subresource   string         `json:"subresource,omitempty"`
	Root          string         `json:"root,omitempty"`
	Template      string         `json:"template,omitempty"`
	Type          *string        `json:"type,omitempty"`
	Impersonation *impersonation `json:"impersonation,omitempty"`
}

type impersonation struct {
	Username string `json:"username"`
}

type finalizers struct {
	Add    []finalizerItem `json:"add,omitempty"`
	Remove []finalizerItem `json:"remove,omitempty"`
	Empty  bool            `json:"empty,omitempty"`
}

type finalizerItem struct {
	Value string `json:"value,omitempty"`
}

// Event is the Event a stage records on its object.
type Event struct {
	// Type is Normal or Warning.
	Type string `json:"type,omitempty"`
	// Reason is the Event's reason, a word.
	Reason string `json:"reason,omitempty"`
	// Message is the Event's message.
	Message string `json:"message,omitempty"`
}
