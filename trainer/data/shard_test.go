package data

import (
	"errors"
	"fmt"
	"testing"
)

func TestStridedShard(t *testing.T) {
	if got := fmt.Sprint(StridedShard(10, 1, 4), StridedShard(10, 3, 4), StridedShard(2, 2, 3)); got != "[1 5 9] [3 7] []" {
		t.Errorf("got %s", got)
	}
	// Every sample exactly once over the ranks; sizes differ by at most one.
	for n := 0; n <= 23; n++ {
		for size := 1; size <= 6; size++ {
			seen := make([]int, n)
			lo, hi := n, 0
			for r := 0; r < size; r++ {
				s := StridedShard(n, r, size)
				if len(s) != ShardLen(n, r, size) {
					t.Fatalf("n=%d size=%d rank %d: %d samples, ShardLen says %d", n, size, r, len(s), ShardLen(n, r, size))
				}
				lo, hi = min(lo, len(s)), max(hi, len(s))
				for _, i := range s {
					seen[i]++
				}
			}
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("n=%d size=%d: sample %d in %d shards", n, size, i, c)
				}
			}
			if hi-lo > 1 {
				t.Fatalf("n=%d size=%d: shard sizes from %d to %d", n, size, lo, hi)
			}
		}
	}
}

func TestShardLenPanics(t *testing.T) {
	for _, a := range [][3]int{{5, 0, 0}, {-1, 0, 1}, {5, 2, 2}, {5, -1, 2}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("ShardLen%v did not panic", a)
				}
			}()
			ShardLen(a[0], a[1], a[2])
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
