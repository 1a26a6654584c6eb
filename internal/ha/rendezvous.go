package ha

import (
	"hash/fnv"
	"slices"
)

// Assign shares nodes out among members: each replica gets its share,
// len(nodes)/len(members) rounded up at most, and each node, taken in the
// given order, goes to the first member of its rendezvous order (members by
// descending score for the node) that has room left. Every replica computes
// the same assignment from the same members; when one joins or leaves, the
// nodes that move are mostly those it wins or held (pure rendezvous
// hashing would move only those, but leaves one replica with twice the
// nodes of another often enough at small counts).
func Assign(nodes, members []string) map[string]string {
	out := make(map[string]string, len(nodes))
	if len(members) == 0 {
		return out
	}
	share := (len(nodes) + len(members) - 1) / len(members)
	load := make(map[string]int, len(members))
	order := slices.Clone(members)
	for _, n := range nodes {
		slices.SortFunc(order, func(a, b string) int {
			sa, sb := score(a, n), score(b, n)
			switch {
			case sa > sb:
				return -1
			case sa < sb:
				return 1
			}
			return compareStrings(a, b)
		})
		for _, m := range order {
			if load[m] < share {
				out[n] = m
				load[m]++
				break
			}
		}
	}
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// score hashes a replica and a node together; FNV-1a alone spreads similar
// names poorly, so its result is mixed further (SplitMix64's finalizer).
func score(member, node string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(node))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
