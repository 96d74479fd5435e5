package data

import "fmt"

// Static sharding, strided: rank r of size keeps samples r, r+size,
// r+2·size, … of n, so shard sizes differ by at most one:
//
//	n = 10, size = 4:   rank 0 {0,4,8}  rank 1 {1,5,9}  rank 2 {2,6}  rank 3 {3,7}
//
// Why strided and not contiguous: with no shuffling, step k of N ranks with
// batch b then covers exactly the samples [kNb, (k+1)Nb) that step k of one
// rank with batch N·b covers, so the two runs compute the same gradient
// (the trainer's TestSyncEquivalence); contiguous shards would put samples
// from N distant places of the data into one global batch.

// StridedShard returns rank's samples of n split among size ranks as drawn
// above. It panics when size < 1, n < 0 or rank is outside [0, size): those
// are programmer errors.
func StridedShard(n, rank, size int) []int {
	idx := make([]int, 0, ShardLen(n, rank, size))
	for i := rank; i < n; i += size {
		idx = append(idx, i)
	}
	return idx
}

// ShardLen is len(StridedShard(n, rank, size)), without building it.
func ShardLen(n, rank, size int) int {
	if size < 1 || n < 0 || rank < 0 || rank >= size {
		panic(fmt.Sprintf("data.ShardLen: n=%d rank=%d size=%d, want n ≥ 0 and 0 ≤ rank < size", n, rank, size))
	}
	if rank >= n {
		return 0
	}
	return (n-rank-1)/size + 1
}

// CheckShards returns an error matching ErrMoreRanksThanSamples when n
// samples cannot give each of size ranks at least one sample.
func CheckShards(n, size int) error {
	if size > n {
		return errorf(ErrMoreRanksThanSamples, "%d samples cannot be split among %d ranks: more ranks than samples", n, size)
	}
	return nil
}
