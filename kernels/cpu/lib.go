package cpu

import (
	"github.com/dml-project/dml/kernels"
)

// ConvLib is a library's whole convolutions (package kernels/onednn
// through kernels/blas): the three products of a convolution layer on
// this backend's buffers, in PyTorch's layouts. The lengths are checked
// before it is called.
type ConvLib interface {
	// Name is how the start line names it ("onednn 2.6.3").
	Name() string
	Forward(y, x, w, bias []float32, n, c, h, wd, o, k, stride, pad int) error
	BackwardData(dx, dy, w []float32, n, c, h, wd, o, k, stride, pad int) error
	BackwardFilter(dw, db, x, dy []float32, n, c, h, wd, o, k, stride, pad int) error
	Close()
}

var (
	_ kernels.WholeConvOps     = (*Backend)(nil)
	_ kernels.ProviderReporter = (*Backend)(nil)
)

// SetConvLib makes l serve the backend's whole convolutions
// (kernels.WholeConvOps; nil: none, the model's own convolutions run). The
// backend closes it with itself.
func (be *Backend) SetConvLib(l ConvLib) { be.convLib = l }

// WholeConv: see kernels.WholeConvOps (true where a library serves).
func (be *Backend) WholeConv() bool { return be.convLib != nil }

// Providers: see kernels.ProviderReporter. Nothing is said of a backend
// that serves every op itself.
func (be *Backend) Providers() []kernels.Provided {
	if be.convLib == nil {
		return nil
	}
	return []kernels.Provided{{Ops: "conv", Provider: be.convLib.Name()}, {Ops: "rest", Provider: "dml"}}
}

func (be *Backend) wholeArgs(op string, y, x, w, bias kernels.Buffer, n, c, h, wd, o, k, stride, pad int) (yd, xd, wdd, bd []float32, err error) {
	yd, xd, wdd = be.data(y), be.data(x), be.data(w)
	bl := -1
	if bias != nil {
		bd = be.data(bias)
		bl = len(bd)
	}
	if be.convLib == nil {
		return nil, nil, nil, nil, kernels.UnsupportedConv(op, c, h, wd, o, k, pad)
	}
	if err := kernels.CheckWholeConv(op, len(yd), len(xd), len(wdd), bl, n, c, h, wd, o, k, stride, pad); err != nil {
		return nil, nil, nil, nil, err
	}
	return yd, xd, wdd, bd, nil
}

// ConvForward: see kernels.WholeConvOps.
func (be *Backend) ConvForward(y, x, w, bias kernels.Buffer, n, c, h, wd, o, k, stride, pad int) error {
	yd, xd, wdd, bd, err := be.wholeArgs("cpu.ConvForward", y, x, w, bias, n, c, h, wd, o, k, stride, pad)
	if err != nil || n == 0 {
		return err
	}
	return be.convLib.Forward(yd, xd, wdd, bd, n, c, h, wd, o, k, stride, pad)
}

// ConvBackwardData: see kernels.WholeConvOps.
func (be *Backend) ConvBackwardData(dx, dy, w kernels.Buffer, n, c, h, wd, o, k, stride, pad int) error {
	yd, xd, wdd, _, err := be.wholeArgs("cpu.ConvBackwardData", dy, dx, w, nil, n, c, h, wd, o, k, stride, pad)
	if err != nil || n == 0 {
		return err
	}
	return be.convLib.BackwardData(xd, yd, wdd, n, c, h, wd, o, k, stride, pad)
}

// ConvBackwardFilter: see kernels.WholeConvOps (an empty batch: zero
// gradients).
func (be *Backend) ConvBackwardFilter(dw, db, x, dy kernels.Buffer, n, c, h, wd, o, k, stride, pad int) error {
	yd, xd, wdd, bd, err := be.wholeArgs("cpu.ConvBackwardFilter", dy, x, dw, db, n, c, h, wd, o, k, stride, pad)
	if err != nil {
		return err
	}
	if n == 0 {
		clear(wdd)
		clear(bd)
		return nil
	}
	return be.convLib.BackwardFilter(wdd, bd, xd, yd, n, c, h, wd, o, k, stride, pad)
}
