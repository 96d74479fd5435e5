package collectives_test

import (
	"slices"
	"testing"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/local"
)

// TestAgree: every rank learns every rank's value and the same list of the
// ranks that differ from rank 0's; words whose halves are NaN bit patterns
// (signalling and quiet, with payloads) arrive as sent.
func TestAgree(t *testing.T) {
	values := []uint64{0x7f800001_ffc00001, 0x7f800001_ffc00001, 42, 0x7f800001_ffc00001, 1 << 63}
	for _, n := range []int{1, 2, 5} {
		got := make([][]int, n)
		alls := make([][]uint64, n)
		errs := local.NewWorld(n).Run(func(c *local.Comm) error {
			var err error
			got[c.Rank()], alls[c.Rank()], err = collectives.Agree(c, values[c.Rank()])
			return err
		})
		for r := range n {
			if errs[r] != nil {
				t.Fatalf("n=%d rank %d: %v", n, r, errs[r])
			}
			var want []int
			for q := 1; q < n; q++ {
				if values[q] != values[0] {
					want = append(want, q)
				}
			}
			if !slices.Equal(got[r], want) || !slices.Equal(alls[r], values[:n]) {
				t.Errorf("n=%d rank %d: differ %v all %x, want %v %x", n, r, got[r], alls[r], want, values[:n])
			}
		}
	}
}

// TestAllgatherUint64: several words per rank, rank-major.
func TestAllgatherUint64(t *testing.T) {
	const n = 3
	alls := make([][]uint64, n)
	errs := local.NewWorld(n).Run(func(c *local.Comm) error {
		var err error
		r := uint64(c.Rank())
		alls[c.Rank()], err = collectives.AllgatherUint64(c, []uint64{r, r<<40 | 7, ^r})
		return err
	})
	want := []uint64{0, 7, ^uint64(0), 1, 1<<40 | 7, ^uint64(1), 2, 2<<40 | 7, ^uint64(2)}
	for r := range n {
		if errs[r] != nil || !slices.Equal(alls[r], want) {
			t.Errorf("rank %d: %x, %v; want %x", r, alls[r], errs[r], want)
		}
	}
}

// TestTagRangesDisjoint: no two users of a Comm share a tag, and the
// registry's check finds an overlap.
func TestTagRangesDisjoint(t *testing.T) {
	if err := collectives.CheckTagRanges(collectives.TagRanges); err != nil {
		t.Fatal(err)
	}
	bad := append(slices.Clone(collectives.TagRanges), collectives.TagRange{Owner: "new", Lo: collectives.TagPSBase + 2, Hi: collectives.TagPSBase + 4})
	if err := collectives.CheckTagRanges(bad); err == nil {
		t.Error("an overlapping range passed")
	}
}
