//go:build !cgo

package onednn

import "errors"

// Soname is the library this package opens (with cgo only).
const Soname = "libdnnl.so.2"

// Load fails: a binary without cgo cannot dlopen.
func Load(int) (string, error) { return "", errors.New("built without cgo") }

// Shape is a convolution's dimensions (PyTorch's layouts).
type Shape struct{ N, C, H, W, O, K, Stride, Pad int }

// Conv is unusable without cgo (Load fails first).
type Conv struct{}

func New() *Conv       { return &Conv{} }
func (c *Conv) Close() {}
func (c *Conv) Forward(_, _, _, _ []float32, _ Shape) error {
	return errors.New("built without cgo")
}
func (c *Conv) BackwardData(_, _, _ []float32, _ Shape) error { return errors.New("built without cgo") }
func (c *Conv) BackwardFilter(_, _, _, _ []float32, _ Shape) error {
	return errors.New("built without cgo")
}
