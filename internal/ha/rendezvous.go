package ha

import (
	"hash/fnv"
)

// Preferred is the replica, of members, that should serve node: the one
// whose score for the node is highest (rendezvous, or highest-random-weight,
// hashing). Every replica computes the same answer from the same members;
// when a replica joins or leaves, only the nodes it wins or held move. It
// returns "" for no members.
func Preferred(node string, members []string) string {
	best, bestScore := "", uint64(0)
	for _, m := range members {
		s := score(m, node)
		if best == "" || s > bestScore || s == bestScore && m < best {
			best, bestScore = m, s
		}
	}
	return best
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
