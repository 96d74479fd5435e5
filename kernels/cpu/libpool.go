package cpu

import (
	"unsafe"

	"github.com/dml-project/dml/kernels"
)

// PoolLib is a Lib that pools data lying in a layout of its own
// (kernels.LibPoolOps): a max pool's forward pass leaves the positions of
// its maxima in a workspace of PoolWorkspace floats, which its gradient
// reads. Its x may be plain (where dml's kernels have no vector path for
// the shape: ownVector).
type PoolLib interface {
	PoolWorkspace(s PoolShape) (int, error)
	// PoolForward writes y in the layout it returns.
	PoolForward(y, ws, x []float32, s PoolShape) (Layout, error)
	// PoolBackward writes dx, in x's layout s.X, which it returns; dy
	// lies in layout dyl.
	PoolBackward(dx, dy, ws []float32, dyl Layout, s PoolShape) (Layout, error)
}

// PoolShape is a pool's: x n×c×h×w in layout X, k×k windows at Stride,
// padded by Pad; the maximum (Max) or the mean.
type PoolShape struct {
	X                          Layout
	N, C, H, W, K, Stride, Pad int
	Max                        bool
}

var _ kernels.LibPoolOps = (*Backend)(nil)

// poolSaved is what a library's max pool keeps from its forward pass for
// the backward one, by its input's buffer: the shape it pooled and the
// positions of the maxima.
type poolSaved struct {
	s  PoolShape
	ws []float32
}

// LibPool: see kernels.LibPoolOps (true where the library pools).
func (be *Backend) LibPool() bool {
	_, ok := be.lib.(PoolLib)
	return ok
}

// Pool: see kernels.LibPoolOps. An x in the library's layout is pooled
// there, y left in the library's layout; a plain x by this package's
// kernels where they have a vector path for the shape (ownVector), else
// by the library.
func (be *Backend) Pool(y, x kernels.Buffer, max bool, n, c, h, w, k, stride, pad int) error {
	xd := be.raw(x)
	xl := be.layoutOf(xd)
	pl, ok := be.poolLib(xl, max, n, c, w, k, stride, pad)
	if !ok {
		delete(be.poolWS, unsafe.SliceData(xd)) // a workspace of an earlier pool of x is stale now
		return be.ownPool(y, x, max, n, c, h, w, k, stride, pad)
	}
	yd := be.raw(y)
	if err := checkPool("Pool", len(xd), len(yd), max, n, c, h, w, k, stride, pad); err != nil {
		return err
	}
	s := PoolShape{X: xl, N: n, C: c, H: h, W: w, K: k, Stride: stride, Pad: pad, Max: max}
	var ws []float32
	if max {
		size, err := pl.PoolWorkspace(s)
		if err != nil {
			return err
		}
		key := unsafe.SliceData(xd)
		sv := be.poolWS[key]
		if len(sv.ws) != size {
			sv.ws = make([]float32, size)
		}
		sv.s = s
		if be.poolWS == nil {
			be.poolWS = map[*float32]poolSaved{}
		}
		be.poolWS[key] = sv
		ws = sv.ws
	}
	be.output(yd)
	yl, err := pl.PoolForward(yd, ws, xd, s)
	be.setLayout(yd, yl)
	return err
}

// PoolGrad: see kernels.LibPoolOps. It runs on the library where Pool
// did and x still lies in the layout Pool saw (a max pool: with the
// workspace Pool left); else on this package's kernels (x reordered to
// plain).
func (be *Backend) PoolGrad(dx, dy, x kernels.Buffer, max bool, n, c, h, w, k, stride, pad int) error {
	xd := be.raw(x)
	s := PoolShape{X: be.layoutOf(xd), N: n, C: c, H: h, W: w, K: k, Stride: stride, Pad: pad, Max: max}
	pl, ok := be.poolLib(s.X, max, n, c, w, k, stride, pad)
	var ws []float32
	if max {
		sv, found := be.poolWS[unsafe.SliceData(xd)]
		ok = ok && found && sv.s == s
		ws = sv.ws
	}
	if !ok {
		return be.ownPoolGrad(dx, dy, x, max, n, c, h, w, k, stride, pad)
	}
	dxd, dyd := be.raw(dx), be.raw(dy)
	if err := firstError(
		checkPool("PoolGrad", len(xd), len(dyd), max, n, c, h, w, k, stride, pad),
		checkLen("PoolGrad", "dx", len(dxd), len(xd)),
	); err != nil {
		return err
	}
	dyl := be.layoutOf(dyd)
	be.output(dxd)
	dxl, err := pl.PoolBackward(dxd, dyd, ws, dyl, s)
	be.setLayout(dxd, dxl)
	return err
}

// poolLib is the library that pools x (in layout xl), where one does: x
// in its layout, or plain where this package's kernels have no vector
// path for the shape (ownVector). Pool and PoolGrad decide alike.
func (be *Backend) poolLib(xl Layout, max bool, n, c, w, k, stride, pad int) (PoolLib, bool) {
	pl, ok := be.lib.(PoolLib)
	if !ok || n <= 0 || c <= 0 || xl == Plain && ownVector(max, w, k, stride, pad) {
		return nil, false
	}
	return pl, true
}

// ownVector reports whether this package's pool of plain data has a
// vector path for the shape, and runs there rather than on the library:
// the 2×2, stride-2 max pool of rows of 4 outputs or more (maxPool22),
// on a CPU with AVX2.
// Elsewhere (overlapping or padded windows, average pools, narrow rows)
// the library's pool of plain data is the faster: measured with dml
// bench ops on a 2-core AMD EPYC, AlexNet's 3×3 stride-2 pools 3.5× as
// fast, VGG-16's last on 4×4 planes 3×; VGG-16's first 2×2 on 32×32
// planes half as fast as maxPool22.
func ownVector(max bool, w, k, stride, pad int) bool {
	return useAVX2 && max && k == 2 && stride == 2 && pad == 0 && w/2 >= 4
}

// checkPool validates a pool's shapes as PadPoolOps' (an average pool has
// no padding).
func checkPool(op string, xLen, yLen int, max bool, n, c, h, w, k, stride, pad int) error {
	if !max && pad != 0 {
		return shapeError(op, "an average pool takes no padding, got %d", pad)
	}
	if n < 0 || c <= 0 || n > 0 && c > xLen/n {
		return shapeError(op, "%d elements for a batch of %d of %d channels", xLen, n, c)
	}
	return kernels.CheckPadPool("cpu."+op, xLen, yLen, n*c, h, w, k, stride, pad)
}

// ownPool is Pool on this package's kernels.
func (be *Backend) ownPool(y, x kernels.Buffer, max bool, n, c, h, w, k, stride, pad int) error {
	if err := checkPool("Pool", x.Len(), y.Len(), max, n, c, h, w, k, stride, pad); err != nil {
		return err
	}
	switch {
	case pad > 0:
		return be.MaxPoolPad(y, x, n*c, h, w, k, stride, pad)
	case max:
		return be.MaxPool(y, x, n*c, h, w, k, stride)
	}
	return be.AvgPool(y, x, n*c, h, w, k, stride)
}

// ownPoolGrad is PoolGrad on this package's kernels.
func (be *Backend) ownPoolGrad(dx, dy, x kernels.Buffer, max bool, n, c, h, w, k, stride, pad int) error {
	if err := checkPool("PoolGrad", x.Len(), dy.Len(), max, n, c, h, w, k, stride, pad); err != nil {
		return err
	}
	switch {
	case pad > 0:
		return be.MaxPoolPadGrad(dx, dy, x, n*c, h, w, k, stride, pad)
	case max:
		return be.MaxPoolGrad(dx, dy, x, n*c, h, w, k, stride)
	}
	return be.AvgPoolGrad(dx, dy, n*c, h, w, k, stride)
}

// forgetSaved drops what the library's ops kept by a buffer within d
// (a max pool's workspace, a batch norm's variance and ReLU mask): d is
// being freed, and the map's key would keep its memory alive.
func (be *Backend) forgetSaved(d []float32) {
	if len(d) == 0 || len(be.poolWS)+len(be.normVar) == 0 {
		return
	}
	lo, hi := span(d)
	in := func(k *float32) bool { p := uintptr(unsafe.Pointer(k)); return p >= lo && p < hi }
	for k := range be.poolWS {
		if in(k) {
			delete(be.poolWS, k)
		}
	}
	for k := range be.normVar {
		if in(k) {
			delete(be.normVar, k)
		}
	}
}
