package kernelstest

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// libPoolShapes are pools of the presets: LeNet's and VGG's 2×2, AlexNet's
// 3×3 at stride 2, ResNet-50's padded 3×3, a global average (ResNet's
// head), a 2×2 average, and channels that fill no whole block (6).
var libPoolShapes = []struct {
	max                        bool
	n, c, h, w, k, stride, pad int
}{
	{true, 2, 16, 8, 8, 2, 2, 0},
	{true, 3, 16, 7, 7, 3, 2, 0},
	{true, 2, 32, 9, 9, 3, 2, 1},
	{true, 2, 16, 6, 6, 3, 1, 1},
	{false, 2, 32, 8, 8, 8, 8, 0},
	{false, 2, 16, 6, 6, 2, 2, 0},
	{true, 2, 6, 8, 8, 2, 2, 0},
}

// testLibPool checks LibPoolOps against float64 loops, on x in the
// library's layout (a whole convolution's output: a 1×1 convolution by
// the identity, which leaves x as it is in the layout the library gives
// it) and on plain x; on plain x of the shape dml's kernels have a
// vector path for, bit for bit those kernels'; and that bad shapes are
// refused with ErrShape. At a precision that rounds products' operands,
// x is rounded first, so that the identity convolution stays one.
func testLibPool(t *testing.T, be kernels.Backend, o Options) {
	lp, has := kernels.LibPoolOf(be)
	if !has {
		t.Skipf("backend %s has no library-served pools (LibPoolOps)", be.Name())
	}
	wc, has := kernels.WholeConvOf(be)
	if !has {
		t.Fatalf("backend %s pools on a library without its convolutions", be.Name())
	}
	libPoolReference(t, be, lp, wc, o)
	libPoolPlainBits(t, be, lp)
	libPoolBadShapes(t, be, lp, wc, o)
}

// identity is the c×c identity matrix: the weights of a 1×1 convolution
// that moves its input into the library's layout and leaves it as it is.
func identity(c int) []float32 {
	id := make([]float32, c*c)
	for i := range c {
		id[i*c+i] = 1
	}
	return id
}

// libPoolReference checks every shape of libPoolShapes against float64
// loops, with x in the library's layout and plain.
func libPoolReference(t *testing.T, be kernels.Backend, lp kernels.LibPoolOps, wc kernels.WholeConvOps, o Options) {
	for si, s := range libPoolShapes {
		name := fmt.Sprintf("%+v", s)
		r := newRand(uint64(950 + si))
		oh, ow := kernels.ConvOut(s.h, s.w, s.k, s.stride, s.pad)
		x := o.rounded(normals(r, s.n*s.c*s.h*s.w, 1)) // what the identity convolution leaves as it is
		dy := normals(r, s.n*s.c*oh*ow, 1)
		wantY, yMag, wantDx, dxMag := refPool(x, dy, s.max, s.n*s.c, s.h, s.w, s.k, s.stride, s.pad)
		xPlain, dyb := load(t, be, x), load(t, be, dy)
		xLib := alloc(t, be, len(x))
		ok(t, name+" identity convolution", wc.ConvForward(xLib, xPlain, load(t, be, identity(s.c)), nil, s.n, s.c, s.h, s.w, s.c, 1, 1, 0))
		bound := make([]float64, len(dxMag))
		for i, m := range dxMag {
			bound[i] = gamma(2*s.k*s.k) * m
		}
		for _, in := range []struct {
			what string
			x    kernels.Buffer
		}{{"library layout", xLib}, {"plain", xPlain}} {
			y := loadGuarded(t, be, filled(len(wantY), 7))
			ok(t, name+" "+in.what+": Pool", lp.Pool(y.buf, in.x, s.max, s.n, s.c, s.h, s.w, s.k, s.stride, s.pad))
			dx := loadGuarded(t, be, filled(len(x), 7))
			ok(t, name+" "+in.what+": PoolGrad", lp.PoolGrad(dx.buf, dyb, in.x, s.max, s.n, s.c, s.h, s.w, s.k, s.stride, s.pad))
			gotY := y.read(t, name)
			if s.max {
				checkExact(t, name+" "+in.what+": y", gotY, wantY)
			} else {
				yb := make([]float64, len(wantY))
				for i, m := range yMag {
					yb[i] = gamma(s.k*s.k+1) * m
				}
				checkWithin(t, name+" "+in.what+": y", gotY, float64s(wantY), yb)
			}
			checkWithin(t, name+" "+in.what+": dx", dx.read(t, name), wantDx, bound)
		}
	}
}

// libPoolPlainBits: plain x of a 2×2, stride-2 max pool (rows of 4
// outputs) gets dml's own kernel's bits (its vector path runs, not the
// library).
func libPoolPlainBits(t *testing.T, be kernels.Backend, lp kernels.LibPoolOps) {
	cv, _ := kernels.ConvOf(be)
	r := newRand(990)
	x, dy := normals(r, 2*6*9*9, 1), normals(r, 2*6*4*4, 1)
	xb, dyb := load(t, be, x), load(t, be, dy)
	for _, c := range []struct {
		name    string
		lib, my func(y kernels.Buffer) error
		n       int
	}{
		{"max 2s2", func(y kernels.Buffer) error { return lp.Pool(y, xb, true, 2, 6, 9, 9, 2, 2, 0) },
			func(y kernels.Buffer) error { return cv.MaxPool(y, xb, 12, 9, 9, 2, 2) }, 2 * 6 * 4 * 4},
		{"max 2s2 gradient", func(dx kernels.Buffer) error { return lp.PoolGrad(dx, dyb, xb, true, 2, 6, 9, 9, 2, 2, 0) },
			func(dx kernels.Buffer) error { return cv.MaxPoolGrad(dx, dyb, xb, 12, 9, 9, 2, 2) }, len(x)},
	} {
		a, b := alloc(t, be, c.n), alloc(t, be, c.n)
		ok(t, c.name, c.lib(a))
		ok(t, c.name, c.my(b))
		checkExact(t, "plain "+c.name, read(t, be, a), read(t, be, b))
	}
}

// libPoolBadShapes: ErrShape, on plain x and on x in the library's layout.
func libPoolBadShapes(t *testing.T, be kernels.Backend, lp kernels.LibPoolOps, wc kernels.WholeConvOps, o Options) {
	r := newRand(991)
	xl := alloc(t, be, 2*16*8*8)
	ok(t, "identity convolution", wc.ConvForward(xl, load(t, be, o.rounded(normals(r, 2*16*8*8, 1))), load(t, be, identity(16)), nil, 2, 16, 8, 8, 16, 1, 1, 0))
	for _, in := range []struct {
		what string
		x    kernels.Buffer
	}{{"plain", load(t, be, normals(r, 2*16*8*8, 1))}, {"library layout", xl}} {
		for _, c := range []struct {
			name string
			call func() error
		}{
			{"average pool with padding", func() error { return lp.Pool(alloc(t, be, 2*16*4*4), in.x, false, 2, 16, 8, 8, 3, 2, 1) }},
			{"wrong y", func() error { return lp.Pool(alloc(t, be, 7), in.x, true, 2, 16, 8, 8, 3, 2, 1) }},
			{"wrong channels", func() error { return lp.Pool(alloc(t, be, 2*16*4*4), in.x, true, 2, 17, 8, 8, 3, 2, 1) }},
			{"window too large", func() error { return lp.Pool(alloc(t, be, 2*16), in.x, true, 2, 16, 8, 8, 9, 1, 0) }},
			{"wrong dx", func() error {
				return lp.PoolGrad(alloc(t, be, 5), alloc(t, be, 2*16*4*4), in.x, true, 2, 16, 8, 8, 3, 2, 1)
			}},
			{"wrong dy", func() error {
				return lp.PoolGrad(alloc(t, be, 2*16*8*8), alloc(t, be, 3), in.x, false, 2, 16, 8, 8, 2, 2, 0)
			}},
		} {
			if err := c.call(); !errors.Is(err, kernels.ErrShape) {
				t.Errorf("%s, x %s: %v, want ErrShape", c.name, in.what, err)
			}
		}
	}
}

// refPool is a pool and its gradient in float64: y (the maximum, the first
// in row-major order, or the mean of the window's cells inside the image),
// the mean of their magnitudes, dx, and the sum of |dy| routed to each
// cell (for the bounds).
func refPool(x, dy []float32, max bool, planes, h, w, k, stride, pad int) (y []float32, ymag, dx, mag []float64) {
	oh, ow := kernels.ConvOut(h, w, k, stride, pad)
	y, ymag, dx, mag = make([]float32, planes*oh*ow), make([]float64, planes*oh*ow), make([]float64, len(x)), make([]float64, len(x))
	for p := range planes {
		for oy := range oh {
			for ox := range ow {
				o := (p*oh+oy)*ow + ox
				best, sum := -1, 0.0
				var cells []int
				for i := max0(oy*stride - pad); i < min(oy*stride-pad+k, h); i++ {
					for j := max0(ox*stride - pad); j < min(ox*stride-pad+k, w); j++ {
						at := (p*h+i)*w + j
						if best < 0 || x[at] > x[best] {
							best = at
						}
						sum += float64(x[at])
						ymag[o] += math.Abs(float64(x[at])) / float64(k*k)
						cells = append(cells, at)
					}
				}
				if max {
					y[o] = x[best]
					dx[best] += float64(dy[o])
					mag[best] += math.Abs(float64(dy[o]))
					continue
				}
				y[o] = float32(sum / float64(k*k))
				for _, at := range cells {
					dx[at] += float64(dy[o]) / float64(k*k)
					mag[at] += math.Abs(float64(dy[o])) / float64(k*k)
				}
			}
		}
	}
	return y, ymag, dx, mag
}

func max0(i int) int { return max(i, 0) }

func float64s(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}
