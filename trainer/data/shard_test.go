package data

import (
	"errors"
	"fmt"
	"testing"
)

func TestShardRange(t *testing.T) {
	tests := []struct {
		n, size int
		want    [][2]int // [lo, hi) per rank
	}{
		{10, 4, [][2]int{{0, 3}, {3, 6}, {6, 8}, {8, 10}}},
		{8, 4, [][2]int{{0, 2}, {2, 4}, {4, 6}, {6, 8}}},
		{7, 1, [][2]int{{0, 7}}},
		{2, 3, [][2]int{{0, 1}, {1, 2}, {2, 2}}},
		{0, 2, [][2]int{{0, 0}, {0, 0}}},
	}
	for _, tc := range tests {
		for rank, w := range tc.want {
			if lo, hi := ShardRange(tc.n, rank, tc.size); lo != w[0] || hi != w[1] {
				t.Errorf("ShardRange(%d, %d, %d) = [%d, %d), want [%d, %d)", tc.n, rank, tc.size, lo, hi, w[0], w[1])
			}
		}
	}
}

// TestShardRangeInvariants: for every n and size the shards tile [0, n) in
// rank order and their sizes differ by at most one, larger ones first.
func TestShardRangeInvariants(t *testing.T) {
	for n := 0; n <= 40; n++ {
		for size := 1; size <= 9; size++ {
			next := 0
			prevLen := n + 1
			for rank := range size {
				lo, hi := ShardRange(n, rank, size)
				if lo != next || hi < lo {
					t.Fatalf("n=%d size=%d rank %d: [%d, %d) does not follow %d", n, size, rank, lo, hi, next)
				}
				if l := hi - lo; l > prevLen || l < n/size || l > n/size+1 {
					t.Fatalf("n=%d size=%d rank %d: %d samples", n, size, rank, l)
				}
				next, prevLen = hi, hi-lo
			}
			if next != n {
				t.Fatalf("n=%d size=%d: shards end at %d", n, size, next)
			}
		}
	}
}

func TestShardRangePanics(t *testing.T) {
	for _, a := range [][3]int{{5, -1, 2}, {5, 2, 2}, {5, 0, 0}, {-1, 0, 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("ShardRange%v did not panic", a)
				}
			}()
			ShardRange(a[0], a[1], a[2])
		}()
	}
}

func TestCheckShards(t *testing.T) {
	for _, tc := range []struct {
		n, size int
		ok      bool
	}{{4, 4, true}, {5, 4, true}, {3, 4, false}, {0, 1, false}} {
		err := CheckShards(tc.n, tc.size)
		if tc.ok != (err == nil) {
			t.Errorf("CheckShards(%d, %d) = %v", tc.n, tc.size, err)
		}
		if err != nil && (!errors.Is(err, ErrMoreRanksThanSamples) || err.Error() != fmt.Sprintf("%d samples cannot be split among %d ranks: more ranks than samples", tc.n, tc.size)) {
			t.Errorf("CheckShards(%d, %d) = %q", tc.n, tc.size, err)
		}
	}
}
