package allreduce

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/trainer/engine"
	"github.com/dml-project/dml/trainer/model"
)

// TestLossScaler: the scale's rules on their own — halved on an overflow,
// doubled after growthInterval finite steps in a row, a static scale or
// one at the floor ends the run as diverged.
func TestLossScaler(t *testing.T) {
	for _, c := range []struct {
		spec string
		err  bool
	}{{"", false}, {"off", false}, {"dynamic", false}, {"dynamic:1024", false}, {"512", false}, {"3", false},
		{"dynamic:1000", true}, {"0.5", true}, {"dynamic:0", true}, {"1e9", true}, {"x", true}, {"dynamic:", true}} {
		if _, err := parseLossScale(c.spec); (err != nil) != c.err {
			t.Errorf("parseLossScale(%q): %v", c.spec, err)
		}
	}
	l, _ := parseLossScale("dynamic:8")
	cause := engine.ErrNonFinite
	if err := l.overflow(cause); err != nil || l.scale != 4 || l.skipped != 1 {
		t.Fatalf("overflow at 8: %v, scale %v, skipped %d", err, l.scale, l.skipped)
	}
	for range growthInterval - 1 {
		l.finite()
	}
	if l.scale != 4 {
		t.Fatalf("grew after %d finite steps", growthInterval-1)
	}
	if l.finite(); l.scale != 8 || l.good != 0 {
		t.Fatalf("after %d finite steps: scale %v, want 8", growthInterval, l.scale)
	}
	l.scale = 1
	if err := l.overflow(cause); !errors.Is(err, engine.ErrNonFinite) {
		t.Errorf("overflow at scale 1: %v, want ErrNonFinite", err)
	}
	s, _ := parseLossScale("256")
	if err := s.overflow(cause); !errors.Is(err, engine.ErrNonFinite) || s.scale != 256 {
		t.Errorf("static overflow: %v (scale %v)", err, s.scale)
	}
	var none *lossScaler
	if none.factor() != 1 {
		t.Error("no scaler: factor ≠ 1")
	}
}

// TestErrorFeedback: what a rank sends plus its new residue is its gradient
// plus its old residue, exactly; and the residue is what rounding took off.
func TestErrorFeedback(t *testing.T) {
	for _, w := range []collectives.Wire{collectives.WireF16, collectives.WireBF16} {
		rng := rand.New(rand.NewPCG(3, 4))
		g := &gradWire{wire: w, residue: make([]float32, 1000)}
		for step := range 5 {
			grads := make([]float32, 300)
			for i := range grads {
				grads[i] = float32(rng.NormFloat64()) * 1e-3
			}
			const lo = 200
			before := slices.Clone(g.residue[lo : lo+len(grads)])
			in := slices.Clone(grads)
			g.feed(grads, lo, 1024)
			nonzero := 0
			for i := range grads {
				if grads[i]+g.residue[lo+i] != in[i]+before[i] {
					t.Fatalf("%v step %d: sent %v + residue %v ≠ gradient %v + old residue %v", w, step, grads[i], g.residue[lo+i], in[i], before[i])
				}
				q := []float32{grads[i]}
				collectives.Round(w, q, 1024)
				if q[0] != grads[i] {
					t.Fatalf("%v: sent %v, which the wire does not hold", w, grads[i])
				}
				if g.residue[lo+i] != 0 {
					nonzero++
				}
			}
			if nonzero == 0 {
				t.Fatalf("%v step %d: every residue is 0", w, step)
			}
			if g.residue[0] != 0 || g.residue[999] != 0 {
				t.Fatalf("%v: residues outside the bucket changed", w)
			}
		}
	}
}

// TestBucketPlan: the plan covers the gradient and its stats slots exactly,
// last layer first, in whole layers, each bucket within the cap unless it
// is one layer; cap 0 is one bucket.
func TestBucketPlan(t *testing.T) {
	arch, err := model.NewArch(784, []int{512, 256}, 10, model.SoftmaxCE)
	if err != nil {
		t.Fatal(err)
	}
	layers := arch.Layers()
	end := arch.NumParams() + model.GradStats
	starts := map[int]bool{}
	for _, l := range layers {
		starts[l.WOff] = true
	}
	for _, capBytes := range []int{0, -1, 1, 4 * 2570, 4*2570 + 4, 1 << 20, 4 * 133642, 4 * end, 1 << 30} {
		plan := bucketPlan(arch, capBytes)
		if plan[0].hi != end || plan[len(plan)-1].lo != 0 {
			t.Fatalf("cap %d: plan %v does not cover [0,%d)", capBytes, plan, end)
		}
		for i, b := range plan {
			if !starts[b.lo] {
				t.Errorf("cap %d: bucket %d starts at %d, not at a layer", capBytes, i, b.lo)
			}
			if i > 0 && plan[i-1].lo != b.hi {
				t.Errorf("cap %d: bucket %d [%d,%d) does not end where bucket %d starts (%d)", capBytes, i, b.lo, b.hi, i-1, plan[i-1].lo)
			}
			layersIn := 0
			for _, l := range layers {
				if l.WOff >= b.lo && l.WOff < b.hi {
					layersIn++
				}
			}
			if capBytes > 0 && 4*(b.hi-b.lo) > capBytes && layersIn > 1 {
				t.Errorf("cap %d: bucket %d holds %d layers in %d bytes", capBytes, i, layersIn, 4*(b.hi-b.lo))
			}
		}
		switch {
		case capBytes <= 0 || capBytes >= 4*end:
			if len(plan) != 1 {
				t.Errorf("cap %d: %d buckets, want 1", capBytes, len(plan))
			}
		case capBytes < 4*2570:
			if len(plan) != len(layers) {
				t.Errorf("cap %d: %d buckets, want one per layer (%d)", capBytes, len(plan), len(layers))
			}
		}
	}
	// The MLP of docs/results.md at the default cap: the two small layers together,
	// then layer 0 (1.6 MB) on its own.
	if got, want := bucketPlan(arch, engine.DefaultBucketBytes), []bucket{{lo: layers[1].WOff, hi: end}, {lo: 0, hi: layers[1].WOff}}; !slices.Equal(got, want) {
		t.Errorf("default plan %v, want %v", got, want)
	}
}
