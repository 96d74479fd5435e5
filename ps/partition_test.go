package ps

import (
	"reflect"
	"testing"
)

func TestPartition(t *testing.T) {
	for _, tc := range []struct {
		p, s int
		want []Range
	}{
		{10, 3, []Range{{0, 4}, {4, 7}, {7, 10}}},
		{9, 3, []Range{{0, 3}, {3, 6}, {6, 9}}},
		{2, 3, []Range{{0, 1}, {1, 2}, {2, 2}}}, // p < s: empty ranges at the end
		{0, 2, []Range{{0, 0}, {0, 0}}},
		{7, 1, []Range{{0, 7}}},
	} {
		if got := Partition(tc.p, tc.s); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Partition(%d, %d) = %v, want %v", tc.p, tc.s, got, tc.want)
		}
	}
}

func TestPartitionProperties(t *testing.T) {
	for p := 0; p < 40; p++ {
		for s := 1; s < 7; s++ {
			rs := Partition(p, s)
			lo, minLen, maxLen := 0, p, 0
			for _, r := range rs {
				if r.Lo != lo || r.Hi < r.Lo {
					t.Fatalf("Partition(%d,%d) = %v: not contiguous", p, s, rs)
				}
				lo = r.Hi
				minLen, maxLen = min(minLen, r.Len()), max(maxLen, r.Len())
			}
			if lo != p || maxLen-minLen > 1 {
				t.Fatalf("Partition(%d,%d) = %v: does not cover [0,%d) in balanced ranges", p, s, rs, p)
			}
			for k := 0; k < p; k++ {
				if o := Owner(rs, k); o < 0 || !rs[o].Contains(k) {
					t.Fatalf("Owner(%v, %d) = %d", rs, k, o)
				}
			}
			if Owner(rs, p) != -1 || Owner(rs, -1) != -1 {
				t.Fatalf("Owner outside the model should be -1")
			}
		}
	}
}

func TestSplitKeys(t *testing.T) {
	rs := Partition(10, 3) // [0,4) [4,7) [7,10)
	keys := []int64{0, 3, 4, 9}
	if got, want := splitKeys(rs, keys), []int{0, 2, 3, 4}; !reflect.DeepEqual(got, want) {
		t.Errorf("splitKeys = %v, want %v", got, want)
	}
	if got, want := splitKeys(rs, nil), []int{0, 0, 0, 0}; !reflect.DeepEqual(got, want) {
		t.Errorf("splitKeys(nil) = %v, want %v", got, want)
	}
}
