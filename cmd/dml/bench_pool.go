package main

import (
	"fmt"
	"time"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer/model"
)

// timePools times each pool shape's forward and backward pass on dml's
// kernels (own, plain data) and on the library (lib's LibPoolOps, its
// data in the library's layout), rounds alternating; nothing where the
// library does not pool.
func timePools(shapes []model.PoolShape, own, lib kernels.Backend, rows, rounds int) ([]bytesTiming, error) {
	if _, ok := kernels.LibPoolOf(lib); !ok {
		return nil, nil
	}
	var out []bytesTiming
	for _, s := range shapes {
		oh, ow := kernels.ConvOut(s.H, s.W, s.K, s.Stride, s.Pad)
		kind := "avgpool"
		if s.Max {
			kind = "maxpool"
		}
		t := bytesTiming{op: fmt.Sprintf("%s %ds%dp%d of %d×%d×%d", kind, s.K, s.Stride, s.Pad, s.C, s.H, s.W), layers: s.Layers,
			bytes: float64(4 * 2 * rows * s.C * (s.H*s.W + oh*ow))}
		var err error
		t.own, t.lib, err = alternate(rounds, own, lib, func(be kernels.Backend, isLib bool) (func() (time.Duration, error), func(), error) {
			return poolRun(be, isLib, rows, s)
		})
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// poolRun readies one pool of rows×s on be and returns a function that
// runs its forward and backward pass once and times them: on the
// library's LibPoolOps (lib), x made by a whole 1×1 convolution so that
// it lies in the library's layout, dy a copy of y (in y's); else on the
// ConvOps and PadPoolOps kernels, plain.
func poolRun(be kernels.Backend, lib bool, rows int, s model.PoolShape) (func() (time.Duration, error), func(), error) {
	oh, ow := kernels.ConvOut(s.H, s.W, s.K, s.Stride, s.Pad)
	b := &benchBufs{be: be}
	big, small := rows*s.C*s.H*s.W, rows*s.C*oh*ow
	x, dx, y, dy := b.alloc(big, 0), b.alloc(big, 0), b.alloc(small, 0), b.alloc(small, 0.25)
	xs := make([]float32, big)
	for i := range xs {
		xs[i] = float32(i%13) * 0.25 // no window all alike
	}
	b.then(func() error { return be.Upload(x, xs) })
	pool, grad := ownPool(be, x, y, dx, dy, rows, s)
	if lib {
		lp, _ := kernels.LibPoolOf(be)
		whole, ok := kernels.WholeConvOf(be)
		if !ok {
			b.err = fmt.Errorf("backend %s pools on a library without its convolutions", be.Name())
		}
		in, id := b.alloc(big, 0), b.alloc(s.C*s.C, 0)
		eye := make([]float32, s.C*s.C)
		for c := range s.C {
			eye[c*s.C+c] = 1
		}
		b.then(func() error { return be.Copy(in, x) })
		b.then(func() error { return be.Upload(id, eye) })
		b.then(func() error { return whole.ConvForward(x, in, id, nil, rows, s.C, s.H, s.W, s.C, 1, 1, 0) })
		pool = func() error { return lp.Pool(y, x, s.Max, rows, s.C, s.H, s.W, s.K, s.Stride, s.Pad) }
		grad = func() error { return lp.PoolGrad(dx, dy, x, s.Max, rows, s.C, s.H, s.W, s.K, s.Stride, s.Pad) }
		b.then(pool)
		b.then(func() error { return be.Copy(dy, y) })
	}
	if b.err != nil {
		b.free()
		return nil, nil, b.err
	}
	return func() (time.Duration, error) {
		t0 := time.Now()
		err := pool()
		if err == nil {
			err = grad()
		}
		if err == nil {
			err = be.Sync()
		}
		return time.Since(t0), err
	}, b.free, nil
}

// ownPool is a pool's forward and backward pass on be's ConvOps and
// PadPoolOps.
func ownPool(be kernels.Backend, x, y, dx, dy kernels.Buffer, rows int, s model.PoolShape) (pool, grad func() error) {
	cv, _ := kernels.ConvOf(be)
	pp, _ := kernels.PadPoolOf(be)
	planes := rows * s.C
	switch {
	case s.Pad > 0:
		return func() error { return pp.MaxPoolPad(y, x, planes, s.H, s.W, s.K, s.Stride, s.Pad) },
			func() error { return pp.MaxPoolPadGrad(dx, dy, x, planes, s.H, s.W, s.K, s.Stride, s.Pad) }
	case s.Max:
		return func() error { return cv.MaxPool(y, x, planes, s.H, s.W, s.K, s.Stride) },
			func() error { return cv.MaxPoolGrad(dx, dy, x, planes, s.H, s.W, s.K, s.Stride) }
	}
	return func() error { return cv.AvgPool(y, x, planes, s.H, s.W, s.K, s.Stride) },
		func() error { return cv.AvgPoolGrad(dx, dy, planes, s.H, s.W, s.K, s.Stride) }
}
