package data

import "fmt"

// Epoch order and batches. All ranks of a job call EpochOrder with the same
// (n, seed, epoch, shuffle) and get the same permutation of [0, n). Step s
// of the epoch takes the global batch order[s·B : min((s+1)·B, n)], where B
// is the global batch size (ranks × per-rank batch), and cuts it into size
// contiguous balanced pieces exactly like ShardRange:
//
//	order  = [ 7 2 9 4 0 5 | 1 8 3 6 ]   n = 10, B = 6, size = 2, b = 3
//	step 0:  rank 0 [7 2 9]  rank 1 [4 0 5]
//	step 1:  rank 0 [1 8]    rank 1 [3 6]      (last, partial batch)
//
// Concatenating the pieces of ranks 0..size-1 gives the global batch, so N
// ranks with batch b see exactly the samples, in the same order, that one
// rank with batch N·b sees. To also get the same gradient, sum per-sample
// gradients, all-reduce the sums, and divide by the global batch length
// hi−lo from BatchRange, not by the local one (pieces of a partial batch
// differ by one sample, and may be empty when it has fewer samples than
// ranks).

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

// StepsPerEpoch is the number of global batches of size globalBatch in n
// samples: ⌈n / globalBatch⌉, or ⌊n / globalBatch⌋ with dropLast (the last,
// partial batch skipped). It panics when globalBatch < 1 or n < 0.
func StepsPerEpoch(n, globalBatch int, dropLast bool) int {
	if globalBatch < 1 || n < 0 {
		panic(fmt.Sprintf("data.StepsPerEpoch: n=%d globalBatch=%d, want n ≥ 0 and globalBatch ≥ 1", n, globalBatch))
	}
	if dropLast {
		return n / globalBatch
	}
	return (n + globalBatch - 1) / globalBatch
}

// BatchRange returns the positions [lo, hi) in the epoch order of global
// batch step: lo = step·globalBatch, hi = min(lo+globalBatch, n). It panics
// when step is outside [0, StepsPerEpoch(n, globalBatch, false)).
func BatchRange(n, step, globalBatch int) (lo, hi int) {
	steps := StepsPerEpoch(n, globalBatch, false)
	if step < 0 || step >= steps {
		panic(fmt.Sprintf("data.BatchRange: step %d of an epoch of %d steps (n=%d, globalBatch=%d)", step, steps, n, globalBatch))
	}
	lo = step * globalBatch
	return lo, min(lo+globalBatch, n)
}

// BatchIndices returns rank's piece of global batch step: the sample
// indices order[lo+a : lo+b] where [lo, hi) = BatchRange(len(order), step,
// globalBatch) and [a, b) = ShardRange(hi−lo, rank, size). The result
// aliases order. It panics on arguments BatchRange or ShardRange reject.
func BatchIndices(order []int, step, globalBatch, rank, size int) []int {
	lo, hi := BatchRange(len(order), step, globalBatch)
	a, b := ShardRange(hi-lo, rank, size)
	return order[lo+a : lo+b : lo+b]
}
