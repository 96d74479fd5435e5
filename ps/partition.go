package ps

import (
	"fmt"
	"sort"

	"github.com/dml-project/dml/collectives"
)

// Range is the half-open key range [Lo, Hi).
type Range struct {
	Lo, Hi int
}

// Len is the number of keys in r.
func (r Range) Len() int { return r.Hi - r.Lo }

// Contains reports whether key k lies in r.
func (r Range) Contains(k int) bool { return k >= r.Lo && k < r.Hi }

// String formats r as "[lo,hi)".
func (r Range) String() string { return fmt.Sprintf("[%d,%d)", r.Lo, r.Hi) }

// Partition splits keys [0, p) into s contiguous ranges balanced by size:
// every range holds p/s keys and the first p%s ranges one more. Ranges may be
// empty when p < s. It panics if s < 1 or p < 0 (programmer error).
//
//	Partition(10, 3) = [0,4) [4,7) [7,10)
func Partition(p, s int) []Range {
	if s < 1 || p < 0 {
		panic(fmt.Sprintf("ps.Partition(%d, %d): need p >= 0 and s >= 1", p, s))
	}
	// The same split as the ring AllReduce's chunks.
	out := make([]Range, s)
	for i, c := range collectives.Chunks(p, s) {
		out[i] = Range{c.Off, c.Off + c.Len}
	}
	return out
}

// Owner returns the index of the range in ranges (as made by Partition) that
// contains key k, or -1 if none does.
func Owner(ranges []Range, k int) int {
	i := sort.Search(len(ranges), func(i int) bool { return ranges[i].Hi > k })
	if i < len(ranges) && ranges[i].Contains(k) {
		return i
	}
	return -1
}

// splitKeys returns, for each range, the sub-slice bounds [start[i], start[i+1])
// of the sorted keys that fall in ranges[i]. Keys must be sorted and lie in
// [ranges[0].Lo, ranges[len-1].Hi).
func splitKeys(ranges []Range, keys []int64) []int { return splitKeysInto(nil, ranges, keys) }

// splitKeysInto is splitKeys into buf's storage.
func splitKeysInto(buf []int, ranges []Range, keys []int64) []int {
	start := append(buf[:0], make([]int, len(ranges)+1)...)
	j := 0
	for i, r := range ranges {
		start[i] = j
		for j < len(keys) && keys[j] < int64(r.Hi) {
			j++
		}
	}
	start[len(ranges)] = j
	return start
}
