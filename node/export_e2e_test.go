//go:build e2e

package node

import "fmt"

// PerPodStoreLens reports, by the store's type, how many pod keys each
// store of per-pod state of pc holds, for the e2e test that checks that a
// pod's end leaves nothing behind.
func PerPodStoreLens(pc *PodController) map[string]int {
	out := map[string]int{}
	for _, s := range pc.stores {
		out[fmt.Sprintf("%T", s)] += s.Len()
	}
	return out
}
