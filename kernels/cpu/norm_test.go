package cpu

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// TestBatchNormReluOwn: without a library that fuses them, the fused ops
// are BatchNormTrain then Relu, and ReluGrad then BatchNormGrad, bit for
// bit; NormRelu says they are not worth calling.
func TestBatchNormReluOwn(t *testing.T) {
	be := New()
	if be.NormRelu() {
		t.Fatal("NormRelu without a library")
	}
	const n, c, hw = 3, 4, 10
	r := rand.New(rand.NewPCG(7, 8))
	x, g, b, dy := randn(r, n*c*hw), randn(r, c), randn(r, c), randn(r, n*c*hw)
	run := func(fused bool) (y, dx, dg, db, rm []float32) {
		buf := func(v []float32) kernels.Buffer { return be.mustLoad(t, slices.Clone(v)) }
		xb, gb, bb, dyb := buf(x), buf(g), buf(b), buf(dy)
		yb, mb, ib, rmb, rvb := buf(make([]float32, len(x))), buf(make([]float32, c)), buf(make([]float32, c)), buf(make([]float32, c)), buf(make([]float32, c))
		dxb, dgb, dbb := buf(make([]float32, len(x))), buf(make([]float32, c)), buf(make([]float32, c))
		var err error
		if fused {
			err = be.BatchNormReluTrain(yb, mb, ib, rmb, rvb, xb, gb, bb, n, c, hw, 1e-5, 0.1)
			if err == nil {
				err = be.BatchNormReluGrad(dxb, dgb, dbb, dyb, yb, xb, mb, ib, gb, n, c, hw)
			}
		} else {
			err = be.BatchNormTrain(yb, mb, ib, rmb, rvb, xb, gb, bb, n, c, hw, 1e-5, 0.1)
			if err == nil {
				err = be.Relu(yb, yb)
			}
			masked := buf(make([]float32, len(x)))
			if err == nil {
				err = be.ReluGrad(masked, dyb, yb)
			}
			if err == nil {
				err = be.BatchNormGrad(dxb, dgb, dbb, masked, xb, mb, ib, gb, n, c, hw)
			}
		}
		if err != nil {
			t.Fatalf("fused %v: %v", fused, err)
		}
		get := func(b kernels.Buffer) []float32 { return slices.Clone(be.data(b)) }
		return get(yb), get(dxb), get(dgb), get(dbb), get(rmb)
	}
	y1, dx1, dg1, db1, rm1 := run(true)
	y2, dx2, dg2, db2, rm2 := run(false)
	for _, c := range []struct {
		name      string
		got, want []float32
	}{{"y", y1, y2}, {"dx", dx1, dx2}, {"dgamma", dg1, dg2}, {"dbeta", db1, db2}, {"running mean", rm1, rm2}} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: the fused ops differ from the two ops", c.name)
		}
	}
	if slices.Min(y1) != 0 {
		t.Errorf("y's least value %v: no ReLU applied", slices.Min(y1))
	}
}
