//go:build !cgo

package onednn

import "errors"

// Soname is the library this package opens (with cgo only).
const Soname = "libdnnl.so.2"

// DirEnv names the variable that, when set, is the one folder Soname is
// loaded from.
const DirEnv = "DML_ONEDNN_DIR"

var errNoCgo = errors.New("built without cgo")

// Load fails: a binary without cgo cannot dlopen.
func Load(int) (string, error) { return "", errNoCgo }

// Shape is a convolution's dimensions (PyTorch's layouts).
type Shape struct{ N, C, H, W, O, K, Stride, Pad int }

// Layout says how a buffer's elements lie (see the cgo build).
type Layout int32

// Plain is dml's own layout.
const Plain Layout = 0

// Lib is unusable without cgo (Load fails first).
type Lib struct{}

func New() (*Lib, error)                                 { return nil, errNoCgo }
func (l *Lib) Close()                                    {}
func (l *Lib) Floats(Layout) int                         { return 0 }
func (l *Lib) Reorder(_, _ []float32, _, _ Layout) error { return errNoCgo }
func (l *Lib) Forward(_, _, _, _ []float32, _ Layout, _ Shape) (Layout, error) {
	return Plain, errNoCgo
}
func (l *Lib) BackwardData(_, _, _ []float32, _ Layout, _ Shape) (Layout, error) {
	return Plain, errNoCgo
}
func (l *Lib) BackwardFilter(_, _, _, _ []float32, _, _ Layout, _ Shape) error { return errNoCgo }
func (l *Lib) NormTrain(_, _, _, _, _, _ []float32, _ Layout, _, _, _ int, _ float32) (Layout, error) {
	return Plain, errNoCgo
}
func (l *Lib) NormInfer(_, _, _, _, _, _ []float32, _ Layout, _, _, _ int, _ float32) (Layout, error) {
	return Plain, errNoCgo
}
func (l *Lib) NormGrad(_, _, _, _, _, _, _, _ []float32, _, _ Layout, _, _, _ int, _ float32) (Layout, error) {
	return Plain, errNoCgo
}

func (l *Lib) NormReluWorkspace(_ Layout, _, _, _ int, _ float32) (int, error) { return 0, errNoCgo }
func (l *Lib) NormReluTrain(_, _, _, _, _, _, _ []float32, _ Layout, _, _, _ int, _ float32) (Layout, error) {
	return Plain, errNoCgo
}
func (l *Lib) NormReluGrad(_, _, _, _, _, _, _, _, _ []float32, _, _ Layout, _, _, _ int, _ float32) (Layout, error) {
	return Plain, errNoCgo
}

// PoolShape is a pool's dimensions (see the cgo build).
type PoolShape struct {
	X                          Layout
	N, C, H, W, K, Stride, Pad int
	Max                        bool
}

func (l *Lib) PoolWorkspace(PoolShape) (int, error) { return 0, errNoCgo }
func (l *Lib) PoolForward(_, _, _ []float32, _ PoolShape) (Layout, error) {
	return Plain, errNoCgo
}
func (l *Lib) PoolBackward(_, _, _ []float32, _ Layout, _ PoolShape) (Layout, error) {
	return Plain, errNoCgo
}

func Sgemm(_, _ bool, _, _, _ int, _ float32, _ []float32, _ int, _ []float32, _ int, _ float32, _ []float32, _ int) error {
	return errNoCgo
}
