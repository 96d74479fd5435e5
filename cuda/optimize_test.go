//go:build cuda

package cuda

import (
	"math"
	"slices"
	"testing"

	"github.com/dml-project/dml/kernels/optim"
)

// TestOptimizeArgs: every rule's kernel is launched with the weights, the
// gradient, the state where the rule keeps one, n, the rate's address for
// a per-tensor rule (LARS: not the partial sums before it), then its
// scalars, as floats in 8-byte slots, allocating nothing. Runs without a
// GPU.
func TestOptimizeArgs(t *testing.T) {
	const w, g, st, rate, n = 0x1000, 0x2000, 0x3000, 0x4010, 37
	for _, k := range optim.Kinds {
		u := optim.NewUpdate(optim.Config{Kind: k, LR: 0.1, Momentum: 0.9, WeightDecay: 0.01, Eps: 1e-8,
			Beta1: 0.9, Beta2: 0.999, TrustCoef: 0.001, Step: 2})
		got := optimizeArgs(nil, w, g, st, n, rate, &u)
		want := []uint64{w, g}
		if k.HasState() {
			want = append(want, st)
		}
		want = append(want, n)
		if k.PerTensor() {
			want = append(want, rate)
		}
		for _, v := range u.AppendScalars(nil) {
			want = append(want, uint64(math.Float32bits(v)))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: arguments %#x, want %#x", k, got, want)
		}
		if n := testing.AllocsPerRun(10, func() {
			var slots [16]uint64
			_ = optimizeArgs(slots[:0], w, g, st, n, rate, &u)
		}); n != 0 {
			t.Errorf("%v: building the arguments allocates (%v times): it runs at every update", k, n)
		}
		if len(got) > len(Backend{}.args) {
			t.Errorf("%v: %d arguments, more than the backend's %d slots", k, len(got), len(Backend{}.args))
		}
	}
}
