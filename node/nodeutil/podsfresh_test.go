package nodeutil

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func versioned(name, uid, rv string) *corev1.Pod {
	p := pod(name, "n")
	p.UID, p.ResourceVersion = types.UID(uid), rv
	return p
}

func TestCaughtUp(t *testing.T) {
	list := func(rv string, pods ...*corev1.Pod) *corev1.PodList {
		l := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
		for _, p := range pods {
			l.Items = append(l.Items, *p)
		}
		return l
	}
	cache := func(pods ...*corev1.Pod) []any {
		var out []any
		for _, p := range pods {
			out = append(out, p)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		cached []any
		listed *corev1.PodList
		want   bool
	}{
		{"both empty", nil, list("100"), true},
		{"same versions", cache(versioned("a", "u1", "90")), list("100", versioned("a", "u1", "90")), true},
		{"cache newer than the list", cache(versioned("a", "u1", "120")), list("100", versioned("a", "u1", "90")), true},
		{"cache behind a listed pod", cache(versioned("a", "u1", "80")), list("100", versioned("a", "u1", "90")), false},
		{"listed pod not cached yet", nil, list("100", versioned("a", "u1", "90")), false},
		{"cached pod deleted before the list", cache(versioned("a", "u1", "80")), list("100"), false},
		{"cached pod created after the list", cache(versioned("b", "u2", "110")), list("100"), true},
		{"same name, older pod still cached", cache(versioned("a", "u0", "50")), list("100", versioned("a", "u1", "90")), false},
		{"same name, newer pod created after the list", cache(versioned("a", "u2", "130")), list("100", versioned("a", "u1", "90")), true},
		{"versions that do not compare", cache(versioned("a", "u1", "x"), versioned("b", "u2", "y")), list("z", versioned("a", "u1", "w")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := caughtUp(tc.cached, tc.listed); got != tc.want {
				t.Errorf("caughtUp = %v, want %v", got, tc.want)
			}
		})
	}
}
