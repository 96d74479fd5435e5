package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestMaxPool22MatchesScalar: the 2×2 max pool's AVX2 blocks (8 and 4
// windows, the last one overlapping) give the scalar code's output and
// gradient bit for bit on random shapes whose values are mostly ties, ±0,
// −Inf and NaNs anywhere in the windows (so that NaN blocks in every
// position fall back).
func TestMaxPool22MatchesScalar(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 here (or not amd64): only the scalar code runs")
	}
	r := rand.New(rand.NewPCG(11, 12))
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 2, float32(math.Inf(-1)), float32(math.NaN())}
	for range 300 {
		planes, h, w := 1+r.IntN(3), 2+r.IntN(5), 2+r.IntN(40)
		x := make([]float32, planes*h*w)
		for i := range x {
			if r.IntN(4) == 0 {
				x[i] = float32(r.NormFloat64())
			} else {
				x[i] = vals[r.IntN(len(vals))]
			}
		}
		oh, ow := h/2, w/2
		dy := make([]float32, planes*oh*ow)
		for i := range dy {
			dy[i] = float32(r.NormFloat64())
		}
		run := func() (y, dx []float32) {
			be := New()
			xb, yb, dxb := be.mustLoad(t, x), be.mustLoad(t, make([]float32, len(dy))), be.mustLoad(t, make([]float32, len(x)))
			if err := be.MaxPool(yb, xb, planes, h, w, 2, 2); err != nil {
				t.Fatal(err)
			}
			if err := be.MaxPoolGrad(dxb, be.mustLoad(t, dy), xb, planes, h, w, 2, 2); err != nil {
				t.Fatal(err)
			}
			return yb.(*Buffer).Data(), dxb.(*Buffer).Data()
		}
		y, dx := run()
		var wy, wdx []float32
		func() {
			useAVX2 = false
			defer func() { useAVX2 = true }()
			wy, wdx = run()
		}()
		shape := fmt.Sprintf("%d×%d×%d", planes, h, w)
		check(t, shape+" y", y, wy)
		check(t, shape+" dx", dx, wdx)
	}
}
