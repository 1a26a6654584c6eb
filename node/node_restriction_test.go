package node

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// TestRestrictNodeLabels: the kubelet's NodeRestriction rules, applied to
// what a provider proposes over what the Node has.
func TestRestrictNodeLabels(t *testing.T) {
	base := map[string]string{"type": "virtual-kubelet", "kubernetes.io/role": "agent", "kubernetes.io/hostname": "vk0"}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := maps.Clone(m)
		if out == nil {
			out = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	without := func(m map[string]string, k string) map[string]string {
		out := maps.Clone(m)
		delete(out, k)
		return out
	}
	for _, tc := range []struct {
		name              string
		current, proposed map[string]string
		want              map[string]string
		refused           []string
	}{
		{"registration: kubelet labels and custom ones",
			nil, map[string]string{"kubernetes.io/hostname": "vk0", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1", "node.kubernetes.io/instance-type": "vk",
				"beta.kubernetes.io/os": "linux", "failure-domain.beta.kubernetes.io/zone": "z1",
				"kubelet.kubernetes.io/x": "1", "a.node.kubernetes.io/y": "2", "example.com/x": "y", "plain": "v"},
			nil, nil},
		{"control-plane role refused",
			nil, map[string]string{"node-role.kubernetes.io/control-plane": "", "example.com/x": "y"},
			map[string]string{"example.com/x": "y"}, []string{"node-role.kubernetes.io/control-plane"}},
		{"another node's hostname refused, the own one kept",
			base, with(base, "kubernetes.io/hostname", "other"),
			base, []string{"kubernetes.io/hostname"}},
		{"hostname new and wrong is dropped",
			nil, map[string]string{"kubernetes.io/hostname": "other"},
			map[string]string{}, []string{"kubernetes.io/hostname"}},
		{"node-restriction namespace and subdomains refused",
			nil, map[string]string{"node-restriction.kubernetes.io/pool": "a", "x.node-restriction.kubernetes.io/pool": "b"},
			map[string]string{}, []string{"node-restriction.kubernetes.io/pool", "x.node-restriction.kubernetes.io/pool"}},
		{"other kubernetes.io and k8s.io labels refused",
			nil, map[string]string{"kubernetes.io/role": "master", "k8s.io/x": "1", "sub.k8s.io/y": "2", "node-role.kubernetes.io/worker": ""},
			map[string]string{}, []string{"k8s.io/x", "kubernetes.io/role", "node-role.kubernetes.io/worker", "sub.k8s.io/y"}},
		{"look-alike namespaces are not kubernetes'",
			nil, map[string]string{"notkubernetes.io/x": "1", "k8s.io.example.com/y": "2"},
			nil, nil},
		{"a restricted label the Node has may stay as it is",
			base, with(base, "example.com/x", "y"),
			with(base, "example.com/x", "y"), nil},
		{"nor be changed",
			base, with(base, "kubernetes.io/role", "master"),
			base, []string{"kubernetes.io/role"}},
		{"nor be removed",
			base, without(base, "kubernetes.io/role"),
			base, []string{"kubernetes.io/role"}},
		{"kubelet and custom labels may be removed",
			with(base, "example.com/x", "y"), without(without(base, "kubernetes.io/hostname"), "example.com/x"),
			without(base, "kubernetes.io/hostname"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			currentBefore, proposedBefore := maps.Clone(tc.current), maps.Clone(tc.proposed)
			got, refused := RestrictNodeLabels("vk0", tc.current, tc.proposed)
			want := tc.want
			if want == nil {
				want = tc.proposed
			}
			if !maps.Equal(got, want) || !slices.Equal(refused, tc.refused) {
				t.Errorf("got %v refused %v; want %v refused %v", got, refused, want, tc.refused)
			}
			if !maps.Equal(tc.current, currentBefore) || !maps.Equal(tc.proposed, proposedBefore) {
				t.Errorf("the arguments were modified: %v %v", tc.current, tc.proposed)
			}
		})
	}
}

// TestNodeLabelGuardNamesOnce: a provider proposing the same forbidden
// label again and again is named once per label; one inventing new keys
// does not grow the guard without end.
func TestNodeLabelGuardNamesOnce(t *testing.T) {
	var out bytes.Buffer
	logger := logrus.New()
	logger.SetOutput(&out)
	ctx := log.WithLogger(context.Background(), log.FromLogrus(logrus.NewEntry(logger)))
	g := NewNodeLabelGuard("vk0")
	hostile := map[string]string{"node-role.kubernetes.io/control-plane": "", "kubernetes.io/hostname": "other", "example.com/x": "y"}
	for range 3 {
		if got := g.Restrict(ctx, nil, hostile); !maps.Equal(got, map[string]string{"example.com/x": "y"}) {
			t.Fatalf("Restrict: %v", got)
		}
	}
	for _, label := range []string{"node-role.kubernetes.io/control-plane", "kubernetes.io/hostname"} {
		if n := strings.Count(out.String(), "node label "+label+" "); n != 1 {
			t.Errorf("%s named %d times:\n%s", label, n, out.String())
		}
	}
	if strings.Contains(out.String(), "example.com/x") {
		t.Errorf("an allowed label was logged as refused:\n%s", out.String())
	}
	for i := range 2 * maxNamedRefusals {
		g.Restrict(ctx, nil, map[string]string{fmt.Sprintf("k8s.io/x%d", i): ""})
	}
	if len(g.named) != maxNamedRefusals || strings.Count(out.String(), "not named") != 1 {
		t.Errorf("the guard names %d labels (at most %d), said it stopped %d times", len(g.named), maxNamedRefusals, strings.Count(out.String(), "not named"))
	}
}
