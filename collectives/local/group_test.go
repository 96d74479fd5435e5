package local_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/local"
)

// TestGroup: two groups of one world reduce at the same time, on the same
// tags, each its own ranks' values (every algorithm), while a rank outside
// both waits; bad groups are refused with ErrBadRank.
func TestGroup(t *testing.T) {
	w := local.NewWorld(6)
	w.SetTimeout(30 * time.Second)
	groups := [][]int{{1, 3, 4}, {0, 2}}
	errs := w.Run(func(c *local.Comm) error {
		var mine []int
		for _, g := range groups {
			for _, r := range g {
				if r == c.Rank() {
					mine = g
				}
			}
		}
		if mine == nil {
			return nil // rank 5: in no group
		}
		g, err := collectives.NewGroup(c, mine)
		if err != nil {
			return err
		}
		for _, algo := range []collectives.Algorithm{collectives.Ring, collectives.Tree, collectives.Auto} {
			buf := make([]float32, 1000)
			for i := range buf {
				buf[i] = float32(c.Rank()*1000 + i)
			}
			if err := collectives.Allreduce(g, buf, collectives.Sum, algo); err != nil {
				return err
			}
			for i, v := range buf {
				want := 0
				for _, r := range mine {
					want += r*1000 + i
				}
				if v != float32(want) {
					return fmt.Errorf("rank %d, %v: element %d is %v, want %d (the group %v's sum)", c.Rank(), algo, i, v, want, mine)
				}
			}
		}
		// The group numbers its own collectives (the world's count is
		// not theirs).
		if n := g.NextCollective(); n <= 3 {
			return fmt.Errorf("rank %d: the group's next collective is #%d after 3 AllReduces: they were not numbered", c.Rank(), n)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	bad := local.NewWorld(3)
	errs = bad.Run(func(c *local.Comm) error {
		for _, ranks := range [][]int{{0, 1, 2, 3}, {2, 1, 0}, {0, 0, 1, 2}, {-1, 0, 1, 2}} {
			if _, err := collectives.NewGroup(c, ranks); !errors.Is(err, collectives.ErrBadRank) {
				return fmt.Errorf("group %v: %v, want ErrBadRank", ranks, err)
			}
		}
		if c.Rank() == 2 {
			if _, err := collectives.NewGroup(c, []int{0, 1}); !errors.Is(err, collectives.ErrBadRank) {
				return fmt.Errorf("a group without this rank: %v, want ErrBadRank", err)
			}
		}
		g, err := collectives.NewGroup(c, []int{0, 1, 2})
		if err != nil {
			return err
		}
		if _, err := g.Isend(nil, 3, 0); !errors.Is(err, collectives.ErrBadRank) {
			return fmt.Errorf("a send past the group: %v, want ErrBadRank", err)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
