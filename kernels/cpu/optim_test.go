package cpu

import (
	"testing"

	"github.com/dml-project/dml/kernels/optim"
)

// TestOptimizeAllocatesNothing: an update, which runs at every step (for
// every bucket, or every tensor under LARS), allocates nothing, its op's
// name included.
func TestOptimizeAllocatesNothing(t *testing.T) {
	be := New()
	for _, k := range optim.Kinds {
		w, _ := be.Alloc(100)
		g, _ := be.Alloc(100)
		s, _ := be.Alloc(max(1, k.StatePer()) * 100)
		if !k.HasState() {
			s = nil
		}
		u := optim.NewUpdate(optim.Config{Kind: k, LR: 0.1, Momentum: 0.9, Eps: 1e-8, Beta1: 0.9, Beta2: 0.99, TrustCoef: 0.001})
		if n := testing.AllocsPerRun(20, func() {
			if err := be.Optimize(w, g, s, u); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%v: %v allocations an update", k, n)
		}
	}
}
