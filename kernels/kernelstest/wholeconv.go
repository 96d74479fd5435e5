package kernelstest

import (
	"fmt"
	"math"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// wholeShapes are whole-convolution cases: a "same" 3×3, a strided 3×3,
// a strided 1×1 (ResNet's projection), LeNet-5's first layer, a kernel as
// large as its padded image.
var wholeShapes = []wholeShape{
	{2, 3, 7, 6, 4, 3, 1, 1},
	{3, 5, 8, 8, 6, 3, 2, 1},
	{2, 16, 8, 8, 32, 1, 2, 0},
	{4, 1, 28, 28, 6, 5, 1, 0},
	{1, 2, 5, 5, 3, 5, 1, 2},
}

// wholeShape is a whole convolution's dimensions.
type wholeShape struct{ n, c, h, w, o, k, stride, pad int }

// wholeLibRel widens the bound of a library's convolution: its algorithms
// (Winograd, FFT, implicit GEMM with split reductions) round in more
// places than a sum of products does. At 2e-5 of the sum of magnitudes a
// lost or doubled term (1/K of it, K at most a few thousand here) still
// fails.
const wholeLibRel = 2e-5

// testWholeConv checks WholeConvOps (forward with and without a bias, the
// data and filter gradients, the bias gradient) against float64 loops,
// that nothing outside the outputs is written, and that bad shapes are
// refused with ErrShape.
func testWholeConv(t *testing.T, be kernels.Backend, o Options) {
	wc, has := kernels.WholeConvOf(be)
	if !has {
		t.Skipf("backend %s has no library-served whole convolutions (WholeConvOps)", be.Name())
	}
	for ci, s := range wholeShapes {
		name := fmt.Sprintf("%+v", s)
		r := newRand(uint64(900 + ci))
		oh, ow := kernels.ConvOut(s.h, s.w, s.k, s.stride, s.pad)
		x := normals(r, s.n*s.c*s.h*s.w, 1)
		w := normals(r, s.o*s.c*s.k*s.k, 0.5)
		bias := normals(r, s.o, 1)
		dy := normals(r, s.n*s.o*oh*ow, 1)
		ref := refWholeConv(s, o.rounded(x), o.rounded(w), o.rounded(dy))
		bound := func(mag []float64, terms int) []float64 {
			top := 0.0
			for _, m := range mag {
				top = max(top, m)
			}
			out := make([]float64, len(mag))
			for i, m := range mag {
				out[i] = (gamma(terms+3)+wholeLibRel+o.exact().GemmRelTol+o.WholeConvRelTol)*m + 1e-6*top
			}
			return out
		}
		yb := make([]float64, len(ref.y))
		for i := range ref.y {
			yb[i] = ref.y[i] + float64(bias[(i/(oh*ow))%s.o])
		}
		ybmag := make([]float64, len(ref.y))
		for i := range ref.ymag {
			ybmag[i] = ref.ymag[i] + math.Abs(float64(bias[(i/(oh*ow))%s.o]))
		}
		xbuf, wbuf, bbuf, dybuf := load(t, be, x), load(t, be, w), load(t, be, bias), load(t, be, dy)

		out := loadGuarded(t, be, filled(len(ref.y), 7))
		ok(t, name+" forward", wc.ConvForward(out.buf, xbuf, wbuf, nil, s.n, s.c, s.h, s.w, s.o, s.k, s.stride, s.pad))
		checkWithin(t, name+": y", out.read(t, name), ref.y, bound(ref.ymag, s.c*s.k*s.k))
		outb := loadGuarded(t, be, filled(len(ref.y), 7))
		ok(t, name+" forward with bias", wc.ConvForward(outb.buf, xbuf, wbuf, bbuf, s.n, s.c, s.h, s.w, s.o, s.k, s.stride, s.pad))
		checkWithin(t, name+": y with bias", outb.read(t, name), yb, bound(ybmag, s.c*s.k*s.k+1))

		dxb := loadGuarded(t, be, filled(len(x), 7))
		ok(t, name+" data gradient", wc.ConvBackwardData(dxb.buf, dybuf, wbuf, s.n, s.c, s.h, s.w, s.o, s.k, s.stride, s.pad))
		checkWithin(t, name+": dx", dxb.read(t, name), ref.dx, bound(ref.dxmag, s.o*s.k*s.k))

		dwb, dbb := loadGuarded(t, be, filled(len(w), 7)), loadGuarded(t, be, filled(s.o, 7))
		ok(t, name+" filter gradient", wc.ConvBackwardFilter(dwb.buf, dbb.buf, xbuf, dybuf, s.n, s.c, s.h, s.w, s.o, s.k, s.stride, s.pad))
		checkWithin(t, name+": dw", dwb.read(t, name), ref.dw, bound(ref.dwmag, s.n*oh*ow))
		checkWithin(t, name+": db", dbb.read(t, name), ref.db, bound(ref.dbmag, s.n*oh*ow))
		dw2 := loadGuarded(t, be, filled(len(w), 7))
		ok(t, name+" filter gradient without bias", wc.ConvBackwardFilter(dw2.buf, nil, xbuf, dybuf, s.n, s.c, s.h, s.w, s.o, s.k, s.stride, s.pad))
		checkWithin(t, name+": dw (no bias)", dw2.read(t, name), ref.dw, bound(ref.dwmag, s.n*oh*ow))
	}
	// An empty batch: the filter gradients are zero, nothing else written.
	w := load(t, be, filled(2*3*3*3, 1))
	dw, db := loadGuarded(t, be, filled(2*3*3*3, 7)), loadGuarded(t, be, filled(2, 7))
	empty := alloc(t, be, 0)
	ok(t, "empty batch", wc.ConvBackwardFilter(dw.buf, db.buf, empty, empty, 0, 3, 4, 4, 2, 3, 1, 1))
	checkExact(t, "dw of an empty batch", dw.read(t, "empty"), filled(2*3*3*3, 0))
	checkExact(t, "db of an empty batch", db.read(t, "empty"), filled(2, 0))
	// Shapes that do not fit: ErrShape, outputs untouched.
	x := load(t, be, filled(2*3*4*4, 1))
	y := loadGuarded(t, be, filled(2*2*4*4, 5))
	wantShapeErrs(t,
		wc.ConvForward(y.buf, x, w, nil, 2, 3, 4, 4, 2, 3, 1, 0),          // y would be 2×2×2×2
		wc.ConvForward(y.buf, x, w, nil, 2, 3, 4, 4, 2, 3, 0, 1),          // stride 0
		wc.ConvBackwardData(x, y.buf, w, 2, 3, 4, 4, 3, 3, 1, 1),          // weights for 3 outputs
		wc.ConvBackwardFilter(w, y.buf, x, y.buf, 2, 3, 4, 4, 2, 3, 1, 1), // a bias of 64
	)
	checkExact(t, "y after bad shapes", y.read(t, "bad"), filled(2*2*4*4, 5))
}

// wholeRef is a whole convolution's products in float64 and, beside each
// result, the sum of its terms' magnitudes (the bound's scale).
type wholeRef struct{ y, ymag, dx, dxmag, dw, dwmag, db, dbmag []float64 }

// refWholeConv is the float64 reference of testWholeConv: y = x ⋆ w, and
// the data, filter and bias gradients given dy.
func refWholeConv(s wholeShape, x, w, dy []float32) wholeRef {
	oh, ow := kernels.ConvOut(s.h, s.w, s.k, s.stride, s.pad)
	xi := func(sm, c, i, j int) int { return ((sm*s.c+c)*s.h+i)*s.w + j }
	wi := func(oc, c, ki, kj int) int { return ((oc*s.c+c)*s.k+ki)*s.k + kj }
	yi := func(sm, oc, i, j int) int { return ((sm*s.o+oc)*oh+i)*ow + j }
	y, ymag := make([]float64, len(dy)), make([]float64, len(dy))
	dx, dxmag := make([]float64, len(x)), make([]float64, len(x))
	dw, dwmag := make([]float64, len(w)), make([]float64, len(w))
	db, dbmag := make([]float64, s.o), make([]float64, s.o)
	for sm := range s.n {
		for oc := range s.o {
			for i := range oh {
				for j := range ow {
					g := float64(dy[yi(sm, oc, i, j)])
					db[oc] += g
					dbmag[oc] += math.Abs(g)
					for c := range s.c {
						for ki := range s.k {
							for kj := range s.k {
								ii, jj := i*s.stride+ki-s.pad, j*s.stride+kj-s.pad
								if ii < 0 || jj < 0 || ii >= s.h || jj >= s.w {
									continue
								}
								xv, wv := float64(x[xi(sm, c, ii, jj)]), float64(w[wi(oc, c, ki, kj)])
								y[yi(sm, oc, i, j)] += xv * wv
								ymag[yi(sm, oc, i, j)] += math.Abs(xv * wv)
								dx[xi(sm, c, ii, jj)] += g * wv
								dxmag[xi(sm, c, ii, jj)] += math.Abs(g * wv)
								dw[wi(oc, c, ki, kj)] += g * xv
								dwmag[wi(oc, c, ki, kj)] += math.Abs(g * xv)
							}
						}
					}
				}
			}
		}
	}
	return wholeRef{y, ymag, dx, dxmag, dw, dwmag, db, dbmag}
}
