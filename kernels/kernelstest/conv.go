package kernelstest

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// The convolution ops (kernels.ConvOps), checked against naive float64
// loops written from the ops' definitions. A backend without them skips
// these checks, saying so.

// convShapes are Im2col/Col2im cases: padding, strides, a 1×1 kernel, a
// kernel as large as the padded image, odd and non-square images, and
// LeNet-5's and ResNet-20's layers.
var convShapes = []struct{ n, c, h, w, k, stride, pad int }{
	{1, 1, 1, 1, 1, 1, 0},
	{2, 3, 5, 7, 3, 1, 1},
	{3, 2, 9, 6, 3, 2, 0},
	{1, 4, 8, 8, 1, 1, 0},
	{2, 1, 3, 3, 5, 1, 1},
	{2, 3, 7, 5, 3, 2, 1},
	{2, 1, 28, 28, 5, 1, 2},  // LeNet-5 conv1
	{2, 6, 14, 14, 5, 1, 0},  // LeNet-5 conv2
	{1, 16, 16, 16, 3, 2, 1}, // ResNet-20, stage 2's first conv
	{0, 2, 4, 4, 3, 1, 1},    // an empty batch
}

// poolShapes are pooling cases: LeNet's 2×2, overlapping windows, odd
// sizes that leave a remainder, and a global pool.
var poolShapes = []struct{ planes, h, w, k, stride int }{
	{1, 1, 1, 1, 1},
	{12, 28, 28, 2, 2},
	{3, 7, 5, 3, 2},
	{2, 9, 9, 3, 1},
	{4, 8, 8, 8, 8},
	{5, 5, 4, 2, 2},
	{0, 4, 4, 2, 2},
	{3, 20, 33, 2, 2},  // rows of 16 outputs: two 8-wide blocks (cpu's AVX2)
	{2, 17, 18, 2, 2},  // rows of 9: blocks that overlap
	{16, 10, 10, 2, 2}, // LeNet-5's second pool: rows of 5, 4-wide blocks overlapping
	{2, 9, 8, 2, 2},    // rows of 4
}

func convOps(t *testing.T, be kernels.Backend) kernels.ConvOps {
	t.Helper()
	c, ok := kernels.ConvOf(be)
	if !ok {
		t.Skipf("backend %s has no ConvOps: convolutional networks do not run on it", be.Name())
	}
	return c
}

// im2colRef is Im2col's definition, element by element: row (ci·k+ki)·k+kj,
// column s·oh·ow + oy·ow + ox.
func im2colRef(x []float32, n, c, h, w, k, stride, pad int) []float32 {
	oh, ow := kernels.ConvOut(h, w, k, stride, pad)
	out := make([]float32, 0, n*c*k*k*oh*ow)
	for ci := range c {
		for ki := range k {
			for kj := range k {
				for s := range n {
					for oy := range oh {
						for ox := range ow {
							iy, ix := oy*stride+ki-pad, ox*stride+kj-pad
							v := float32(0)
							if iy >= 0 && iy < h && ix >= 0 && ix < w {
								v = x[((s*c+ci)*h+iy)*w+ix]
							}
							out = append(out, v)
						}
					}
				}
			}
		}
	}
	return out
}

// testIm2col checks Im2col exactly (it only copies), with guards.
func testIm2col(t *testing.T, be kernels.Backend) {
	cv := convOps(t, be)
	for i, s := range convShapes {
		name := fmt.Sprintf("%+v", s)
		x := normals(newRand(uint64(200+i)), s.n*s.c*s.h*s.w, 1)
		want := im2colRef(x, s.n, s.c, s.h, s.w, s.k, s.stride, s.pad)
		xb, cb := loadGuarded(t, be, x), loadGuarded(t, be, filled(len(want), 7))
		ok(t, name, cv.Im2col(cb.buf, xb.buf, s.n, s.c, s.h, s.w, s.k, s.stride, s.pad))
		checkExact(t, name+": cols", cb.read(t, name), want)
		checkExact(t, name+": x after", xb.read(t, name), x)
	}
}

// testCol2im checks Col2im against the float64 scatter-add of its
// definition; the output starts full of garbage, which must not leak.
func testCol2im(t *testing.T, be kernels.Backend) {
	cv := convOps(t, be)
	for i, s := range convShapes {
		name := fmt.Sprintf("%+v", s)
		oh, ow := kernels.ConvOut(s.h, s.w, s.k, s.stride, s.pad)
		cols := normals(newRand(uint64(300+i)), s.n*s.c*s.k*s.k*oh*ow, 1)
		want := make([]float64, s.n*s.c*s.h*s.w)
		mag := make([]float64, len(want))
		count := make([]int, len(want))
		idx := 0
		for ci := range s.c {
			for ki := range s.k {
				for kj := range s.k {
					for sm := range s.n {
						for oy := range oh {
							for ox := range ow {
								iy, ix := oy*s.stride+ki-s.pad, ox*s.stride+kj-s.pad
								if iy >= 0 && iy < s.h && ix >= 0 && ix < s.w {
									at := ((sm*s.c+ci)*s.h+iy)*s.w + ix
									want[at] += float64(cols[idx])
									mag[at] += math.Abs(float64(cols[idx]))
									count[at]++
								}
								idx++
							}
						}
					}
				}
			}
		}
		bound := make([]float64, len(want))
		for j := range bound {
			bound[j] = gamma(count[j]+1) * mag[j]
		}
		cb, db := loadGuarded(t, be, cols), loadGuarded(t, be, filled(len(want), float32(math.NaN())))
		ok(t, name, cv.Col2im(db.buf, cb.buf, s.n, s.c, s.h, s.w, s.k, s.stride, s.pad))
		checkWithin(t, name+": dx", db.read(t, name), want, bound)
	}
}

// testTranspose01 checks Transpose01 exactly (it only moves values), with
// guards, on a convolution's shapes (out × n × oh·ow) and degenerate ones.
func testTranspose01(t *testing.T, be kernels.Backend) {
	cv := convOps(t, be)
	for i, s := range []struct{ a, b, inner int }{{1, 1, 1}, {16, 3, 64}, {6, 2, 784}, {5, 7, 1}, {1, 9, 4}, {0, 3, 2}} {
		name := fmt.Sprintf("%+v", s)
		src := normals(newRand(uint64(250+i)), s.a*s.b*s.inner, 1)
		want := make([]float32, len(src))
		for x := range s.a {
			for y := range s.b {
				copy(want[(y*s.a+x)*s.inner:(y*s.a+x+1)*s.inner], src[(x*s.b+y)*s.inner:(x*s.b+y+1)*s.inner])
			}
		}
		sb, db := loadGuarded(t, be, src), loadGuarded(t, be, filled(len(src), 7))
		ok(t, name, cv.Transpose01(db.buf, sb.buf, s.a, s.b, s.inner))
		checkExact(t, name+": dst", db.read(t, name), want)
		checkExact(t, name+": src after", sb.read(t, name), src)
	}
}

// window visits the k×k window of a pooling output (oy, ox) on plane p:
// f gets the flat index of each input element, row by row.
func window(p, h, w, k, stride, oy, ox int, f func(at int)) {
	for i := oy * stride; i < oy*stride+k; i++ {
		for j := ox * stride; j < ox*stride+k; j++ {
			f((p*h+i)*w + j)
		}
	}
}

// poolInput is a pooling check's input: normals with ties (values
// repeated inside windows) and, in the first window, a NaN.
func poolInput(seed uint64, n int) []float32 {
	x := normals(newRand(seed), n, 1)
	for i := 3; i < n; i += 7 {
		x[i] = x[i-1] // a tie for the first maximum rule
	}
	for _, st := range [][2]int{{4, 10}, {5, 13}} { // ties of −0 and +0: the first is y
		for i := st[0]; i+1 < n; i += st[1] {
			x[i], x[i+1] = float32(math.Copysign(0, -1)), 0
		}
	}
	if n > 1 {
		x[1] = float32(math.NaN())
	}
	return x
}

// testMaxPool checks MaxPool bit for bit (the first maximum: −0 before
// +0 is −0) and MaxPoolGrad against routing dy to each window's first
// maximum (NaNs lose to numbers).
func testMaxPool(t *testing.T, be kernels.Backend) {
	cv := convOps(t, be)
	for i, s := range poolShapes {
		name := fmt.Sprintf("%+v", s)
		oh, ow := kernels.ConvOut(s.h, s.w, s.k, s.stride, 0)
		x := poolInput(uint64(400+i), s.planes*s.h*s.w)
		dy := normals(newRand(uint64(500+i)), s.planes*oh*ow, 1)
		want := make([]float32, s.planes*oh*ow)
		dx := make([]float64, len(x))
		mag := make([]float64, len(x))
		count := make([]int, len(x))
		for p := range s.planes {
			for oy := range oh {
				for ox := range ow {
					best := -1
					window(p, s.h, s.w, s.k, s.stride, oy, ox, func(at int) {
						if v := x[at]; v == v && (best < 0 || x[best] != x[best] || v > x[best]) {
							best = at
						}
					})
					if best < 0 {
						window(p, s.h, s.w, s.k, s.stride, oy, ox, func(at int) {
							if best < 0 {
								best = at
							}
						})
					}
					o := (p*oh+oy)*ow + ox
					want[o] = x[best]
					dx[best] += float64(dy[o])
					mag[best] += math.Abs(float64(dy[o]))
					count[best]++
				}
			}
		}
		xb, yb := loadGuarded(t, be, x), loadGuarded(t, be, filled(len(want), 7))
		ok(t, name, cv.MaxPool(yb.buf, xb.buf, s.planes, s.h, s.w, s.k, s.stride))
		checkBits(t, name+": y", yb.read(t, name), want)
		dyb, dxb := loadGuarded(t, be, dy), loadGuarded(t, be, filled(len(x), float32(math.NaN())))
		ok(t, name, cv.MaxPoolGrad(dxb.buf, dyb.buf, xb.buf, s.planes, s.h, s.w, s.k, s.stride))
		bound := make([]float64, len(x))
		for j := range bound {
			bound[j] = gamma(count[j]+1) * mag[j]
		}
		checkWithin(t, name+": dx", dxb.read(t, name), dx, bound)
	}
}

// testAvgPool checks AvgPool and AvgPoolGrad against the float64 means.
func testAvgPool(t *testing.T, be kernels.Backend) {
	cv := convOps(t, be)
	for i, s := range poolShapes {
		name := fmt.Sprintf("%+v", s)
		oh, ow := kernels.ConvOut(s.h, s.w, s.k, s.stride, 0)
		x := normals(newRand(uint64(600+i)), s.planes*s.h*s.w, 1)
		dy := normals(newRand(uint64(700+i)), s.planes*oh*ow, 1)
		kk := float64(s.k * s.k)
		want, wb := make([]float64, s.planes*oh*ow), make([]float64, s.planes*oh*ow)
		dx, dmag := make([]float64, len(x)), make([]float64, len(x))
		count := make([]int, len(x))
		for p := range s.planes {
			for oy := range oh {
				for ox := range ow {
					o := (p*oh+oy)*ow + ox
					var sum, mag float64
					window(p, s.h, s.w, s.k, s.stride, oy, ox, func(at int) {
						sum += float64(x[at])
						mag += math.Abs(float64(x[at]))
						dx[at] += float64(dy[o]) / kk
						dmag[at] += math.Abs(float64(dy[o])) / kk
						count[at]++
					})
					want[o], wb[o] = sum/kk, gamma(s.k*s.k+2)*mag/kk
				}
			}
		}
		xb, yb := loadGuarded(t, be, x), loadGuarded(t, be, filled(len(want), 7))
		ok(t, name, cv.AvgPool(yb.buf, xb.buf, s.planes, s.h, s.w, s.k, s.stride))
		checkWithin(t, name+": y", yb.read(t, name), want, wb)
		dyb, dxb := loadGuarded(t, be, dy), loadGuarded(t, be, filled(len(x), float32(math.NaN())))
		ok(t, name, cv.AvgPoolGrad(dxb.buf, dyb.buf, s.planes, s.h, s.w, s.k, s.stride))
		bound := make([]float64, len(x))
		for j := range bound {
			bound[j] = gamma(count[j]+2) * dmag[j]
		}
		checkWithin(t, name+": dx", dxb.read(t, name), dx, bound)
	}
}

// testConvErrShape: every conv op refuses shapes that do not fit (wrong
// lengths, a kernel larger than the padded image, padding of a kernel's
// size, zero strides, overflowing products) with ErrShape, writing
// nothing.
func testConvErrShape(t *testing.T, be kernels.Backend) {
	cv := convOps(t, be)
	x := loadGuarded(t, be, filled(2*3*5*5, 1))
	oh, ow := kernels.ConvOut(5, 5, 3, 1, 1)
	cols := loadGuarded(t, be, filled(2*3*9*oh*ow, 2))
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Im2col short cols", func() error { return cv.Im2col(be.View(cols.buf, 0, cols.n-1), x.buf, 2, 3, 5, 5, 3, 1, 1) }},
		{"Im2col wrong image", func() error { return cv.Im2col(cols.buf, x.buf, 2, 3, 5, 4, 3, 1, 1) }},
		{"Im2col kernel too large", func() error { return cv.Im2col(cols.buf, x.buf, 2, 3, 5, 5, 9, 1, 1) }},
		{"Im2col pad of a kernel", func() error { return cv.Im2col(cols.buf, x.buf, 2, 3, 5, 5, 3, 1, 3) }},
		{"Im2col stride 0", func() error { return cv.Im2col(cols.buf, x.buf, 2, 3, 5, 5, 3, 0, 1) }},
		{"Im2col overflow", func() error { return cv.Im2col(cols.buf, x.buf, math.MaxInt/2, 3, 5, 5, 3, 1, 1) }},
		{"Col2im short dx", func() error { return cv.Col2im(be.View(x.buf, 0, x.n-1), cols.buf, 2, 3, 5, 5, 3, 1, 1) }},
		{"Transpose01 short dst", func() error { return cv.Transpose01(be.View(cols.buf, 0, 2*3*5*5-1), x.buf, 2, 3, 25) }},
		{"Transpose01 wrong src", func() error { return cv.Transpose01(be.View(cols.buf, 0, 2*3*5*5), x.buf, 3, 3, 25) }},
		{"Transpose01 negative", func() error { return cv.Transpose01(be.View(cols.buf, 0, 2*3*5*5), x.buf, -2, -3, 25) }},
		{"MaxPool wrong y", func() error { return cv.MaxPool(cols.buf, x.buf, 6, 5, 5, 2, 2) }},
		{"MaxPoolGrad wrong dx", func() error {
			return cv.MaxPoolGrad(be.View(cols.buf, 0, 6*5*5-1), be.View(cols.buf, 0, 6*4), x.buf, 6, 5, 5, 2, 2)
		}},
		{"AvgPool window too large", func() error { return cv.AvgPool(be.View(cols.buf, 0, 6), x.buf, 6, 5, 5, 6, 1) }},
		{"AvgPoolGrad wrong dy", func() error { return cv.AvgPoolGrad(x.buf, be.View(cols.buf, 0, 7), 6, 5, 5, 2, 2) }},
	} {
		err := tc.call()
		if !errors.Is(err, kernels.ErrShape) {
			t.Errorf("%s: %v, want ErrShape", tc.name, err)
		}
		checkExact(t, tc.name+": image", x.read(t, tc.name), filled(x.n, 1))
		checkExact(t, tc.name+": cols", cols.read(t, tc.name), filled(cols.n, 2))
	}
}
