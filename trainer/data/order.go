package data

// Epoch order. The trainer shuffles each rank's shard (shard.go) with
// EpochOrder, seeded from --seed and the shard's index, once per epoch;
// without shuffling the order is the identity.

// EpochOrder returns the sample order of one epoch: a uniform permutation of
// [0, n) drawn from a PCG stream of (seed, epoch) when shuffle is set, the
// identity otherwise. The shuffle algorithm is fixed in this package, so the
// order depends on nothing but its arguments.
func EpochOrder(n int, seed uint64, epoch int, shuffle bool) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	if shuffle {
		permute(newPCG(seed, streamEpoch+uint64(epoch)), order)
	}
	return order
}
