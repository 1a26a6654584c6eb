package node

import (
	"context"
	"encoding/json"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// TaintsAnnotation lists, as JSON, the taints the NodeController set on its
// Node. Taints are one atomic list to server-side apply, so ownership of
// single taints cannot be recorded there; this annotation lets a taint the
// provider no longer wants be removed, even after a restart, while the
// control plane's and users' taints stay.
const TaintsAnnotation = "virtual-kubelet.io/taints"

// writeTaints brings the Node's taints in line with the desired ones: ours
// are added or updated, those we set before and no longer want are removed,
// and every other taint is kept. A write only happens on a change, and is
// retried on a conflict with a fresh read.
func (n *NodeController) writeTaints(ctx context.Context, node *corev1.Node) (*corev1.Node, error) {
	want := n.desired.Spec.Taints
	record, err := taintsRecord(want)
	if err != nil {
		return nil, err
	}
	// The last attempt's error is kept: RetryOnConflict reports none for an
	// error that wraps context.Canceled (shutdown), and the caller would
	// get no node and no error.
	var last error
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, last = n.writeTaintsOnce(ctx, node, want, record)
		return last
	})
	if err == nil {
		err = last
	}
	if err != nil {
		return nil, err
	}
	return node, nil
}

// writeTaintsOnce is one attempt of writeTaints, from node (read when nil).
// It returns the Node as it now is, or nil with the error.
func (n *NodeController) writeTaintsOnce(ctx context.Context, node *corev1.Node, want []corev1.Taint, record string) (*corev1.Node, error) {
	if node == nil {
		var err error
		if node, err = n.nodes.Get(ctx, n.name, metav1.GetOptions{}); err != nil {
			return nil, err
		}
	}
	var before []corev1.Taint
	if v, ok := node.Annotations[TaintsAnnotation]; ok {
		if err := json.Unmarshal([]byte(v), &before); err != nil {
			log.G(ctx).WithError(err).Warnf("ignoring unreadable annotation %s", TaintsAnnotation)
		}
	}
	taints := reconcileTaints(node.Spec.Taints, before, want)
	if apiequality.Semantic.DeepEqual(taints, node.Spec.Taints) && node.Annotations[TaintsAnnotation] == record {
		return node, nil
	}
	update := node.DeepCopy()
	update.Spec.Taints = taints
	if record == "" {
		delete(update.Annotations, TaintsAnnotation)
	} else {
		if update.Annotations == nil {
			update.Annotations = map[string]string{}
		}
		update.Annotations[TaintsAnnotation] = record
	}
	written, err := n.nodes.Update(ctx, update, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, err // read again on a retry
	}
	return written, nil
}

// taintsRecord is the TaintsAnnotation value for taints; none is "".
func taintsRecord(taints []corev1.Taint) (string, error) {
	if len(taints) == 0 {
		return "", nil
	}
	b, err := json.Marshal(taints)
	return string(b), err
}

// reconcileTaints returns have without the taints in before that are not in
// want, and with every taint of want present (matched by key and effect,
// with want's value). Other taints keep their place.
func reconcileTaints(have, before, want []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range have {
		if slices.ContainsFunc(before, sameTaint(t)) && !slices.ContainsFunc(want, sameTaint(t)) {
			continue
		}
		out = append(out, t)
	}
	for _, w := range want {
		if i := slices.IndexFunc(out, sameTaint(w)); i >= 0 {
			out[i].Value = w.Value
			continue
		}
		out = append(out, w)
	}
	return out
}

// sameTaint matches taints with t's key and effect.
func sameTaint(t corev1.Taint) func(corev1.Taint) bool {
	return func(o corev1.Taint) bool { return t.MatchTaint(&o) }
}
