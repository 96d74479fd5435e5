package data

import "fmt"

// Static sharding: n samples split into size contiguous shards, one per
// rank, balanced so that shard sizes differ by at most one. With
// q = n / size and r = n % size, ranks 0..r-1 get q+1 samples and ranks
// r..size-1 get q:
//
//	n = 10, size = 4:   rank 0 [0,3)  rank 1 [3,6)  rank 2 [6,8)  rank 3 [8,10)
//
// Rank k's shard starts at k·q + min(k, r). The shards cover [0, n) in rank
// order, so concatenating them restores the original order.

// ShardRange returns rank's shard [lo, hi) of n samples split among size
// ranks as drawn above. A shard is empty when n < size (see CheckShards).
// It panics when size < 1, n < 0 or rank is outside [0, size): those are
// programmer errors.
func ShardRange(n, rank, size int) (lo, hi int) {
	if size < 1 || n < 0 || rank < 0 || rank >= size {
		panic(fmt.Sprintf("data.ShardRange: n=%d rank=%d size=%d, want n ≥ 0 and 0 ≤ rank < size", n, rank, size))
	}
	q, r := n/size, n%size
	lo = rank*q + min(rank, r)
	hi = lo + q
	if rank < r {
		hi++
	}
	return lo, hi
}

// CheckShards returns an error matching ErrMoreRanksThanSamples when n
// samples cannot give each of size ranks at least one sample.
func CheckShards(n, size int) error {
	if size > n {
		return errorf(ErrMoreRanksThanSamples, "%d samples cannot be split among %d ranks: more ranks than samples", n, size)
	}
	return nil
}
