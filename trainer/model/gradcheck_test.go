package model

import (
	"math"
	"testing"

	"github.com/dml-project/dml/kernels/cpu"
)

// TestModelGradient checks the whole model's backward pass (every layer,
// ReLU masks, both losses) against central finite differences of the
// summed loss.
func TestModelGradient(t *testing.T) {
	for _, tc := range []struct {
		hidden  []int
		outputs int
		loss    Loss
	}{{[]int{7, 5}, 4, SoftmaxCE}, {nil, 3, SoftmaxCE}, {[]int{6}, 1, SigmoidCE}} {
		arch, err := NewArch(9, tc.hidden, tc.outputs, tc.loss)
		if err != nil {
			t.Fatal(err)
		}
		b := cpu.New()
		const rows = 5
		m, err := New(arch, b, rows)
		if err != nil {
			t.Fatal(err)
		}
		params := arch.InitParams(3)
		x := make([]float32, rows*9)
		for i := range x {
			x[i] = float32(math.Sin(float64(i)*1.7)) * 2
		}
		y := []float32{0, 1, float32(2 % max(tc.outputs, 2)), 1, 0}
		if tc.outputs == 1 {
			y = []float32{0, 1, 1, 0, 1}
		}
		batch := append(append([]float32(nil), x...), y...)
		stats := make([]float32, GradStats)
		loss := func(p []float32) float64 {
			b.Upload(m.Params, p)
			if err := m.Upload(batch, rows); err != nil {
				t.Fatal(err)
			}
			if err := m.Step(1, nil); err != nil {
				t.Fatal(err)
			}
			b.Download(stats, m.Stats())
			return float64(stats[0])
		}
		loss(params)
		grad := make([]float32, arch.NumParams()+GradStats)
		b.Download(grad, m.Grads)
		const eps = 2e-3
		worst := 0.0
		for i := range params {
			p := append([]float32(nil), params...)
			p[i] += eps
			up := loss(p)
			p[i] -= 2 * eps
			down := loss(p)
			num := (up - down) / (2 * eps)
			if e := math.Abs(num-float64(grad[i])) / math.Max(1, math.Abs(num)); e > 5e-3 {
				t.Logf("%v %s i=%d num %v ana %v", arch.Sizes, arch.LayerOf(i), i, num, grad[i])
			}
			worst = math.Max(worst, math.Abs(num-float64(grad[i]))/math.Max(1, math.Abs(num)))
		}
		if worst > 2e-2 {
			t.Errorf("%v: worst relative gradient error %.3g > 2e-2", arch.Sizes, worst)
		}
	}
}
