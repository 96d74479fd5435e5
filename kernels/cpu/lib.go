package cpu

import (
	"github.com/dml-project/dml/kernels"
)

// Lib is a library serving some of the backend's ops on its buffers
// (package kernels/onednn through kernels/blas): a convolution layer's
// three products, in PyTorch's layouts, and batch norm. Its outputs may be
// in a layout of its own (layout.go), which it returns; its inputs come
// in the layout they are in. The lengths are checked before it is called.
type Lib interface {
	// Name is how the start line names it ("onednn 2.6.3").
	Name() string
	// Reorder writes src, in layout from, into dst in layout to (one of
	// them Plain); dst and src do not overlap.
	Reorder(dst, src []float32, from, to Layout) error
	ConvForward(y, x, w, bias []float32, xl Layout, n, c, h, wd, o, k, stride, pad int) (Layout, error)
	ConvBackwardData(dx, dy, w []float32, dyl Layout, n, c, h, wd, o, k, stride, pad int) (Layout, error)
	// ConvBackwardFilter's outputs are plain.
	ConvBackwardFilter(dw, db, x, dy []float32, xl, dyl Layout, n, c, h, wd, o, k, stride, pad int) error
	// NormTrain writes y in x's layout, and the batch's mean and biased
	// variance per channel; NormInfer normalises with the mean and
	// variance given; NormGrad takes the mean and variance of NormTrain.
	NormTrain(y, mean, variance, x, gamma, beta []float32, xl Layout, n, c, hw int, eps float32) (Layout, error)
	NormInfer(y, x, mean, variance, gamma, beta []float32, xl Layout, n, c, hw int, eps float32) (Layout, error)
	NormGrad(dx, dgamma, dbeta, dy, x, mean, variance, gamma []float32, dyl, xl Layout, n, c, hw int, eps float32) (Layout, error)
	Close()
}

// NormReluLib is a Lib that fuses a batch norm with the ReLU on its
// output (kernels.NormReluOps): its training pass leaves the ReLU's mask
// in a workspace of NormReluWorkspace floats, which its gradient reads.
type NormReluLib interface {
	NormReluWorkspace(xl Layout, n, c, hw int, eps float32) (int, error)
	NormReluTrain(y, mean, variance, ws, x, gamma, beta []float32, xl Layout, n, c, hw int, eps float32) (Layout, error)
	NormReluGrad(dx, dgamma, dbeta, dy, x, mean, variance, gamma, ws []float32, dyl, xl Layout, n, c, hw int, eps float32) (Layout, error)
}

var (
	_ kernels.NormReluOps      = (*Backend)(nil)
	_ kernels.WholeConvOps     = (*Backend)(nil)
	_ kernels.ProviderReporter = (*Backend)(nil)
)

// SetLib makes l serve the backend's whole convolutions
// (kernels.WholeConvOps) and batch norm (nil: none, the model's own
// convolutions and this package's batch norm run). The backend closes it
// with itself. It is set before the backend's first op.
func (be *Backend) SetLib(l Lib) { be.lib, be.trial = l, false }

// SetLibOnTrial is SetLib for --kernels auto: the library's convolutions
// are candidates that a model measures against its own per shape
// (kernels.OnTrial).
func (be *Backend) SetLibOnTrial(l Lib) { be.lib, be.trial = l, l != nil }

// LibOnTrial: see kernels.LibTrial.
func (be *Backend) LibOnTrial() bool { return be.trial }

// WholeConv: see kernels.WholeConvOps (true where a library serves).
func (be *Backend) WholeConv() bool { return be.lib != nil }

// Providers: see kernels.ProviderReporter. Nothing is said of a backend
// that serves every op itself.
func (be *Backend) Providers() []kernels.Provided {
	var ps []kernels.Provided
	if g, ok := be.blas.(GemmProvider); ok {
		ps = append(ps, g.Provided())
	}
	if be.lib != nil {
		ps = append(ps, kernels.Provided{Ops: "conv", Provider: be.lib.Name()}, kernels.Provided{Ops: "batchnorm", Provider: be.lib.Name()})
		if be.LibPool() {
			ps = append(ps, kernels.Provided{Ops: "pool", Provider: be.lib.Name() + " (on its layouts)"})
		}
	}
	if len(ps) == 0 {
		return nil
	}
	return append(ps, kernels.Provided{Ops: "rest", Provider: "dml"})
}

// GemmProvider is an Sgemmer that says who serves Gemm on the start line
// (a library other than the backend's own BLAS).
type GemmProvider interface {
	Provided() kernels.Provided
}

// wholeArgs returns a whole convolution's buffers as they lie (x, y: in
// whatever layout; the weights and the bias are never in a library's).
func (be *Backend) wholeArgs(op string, y, x, w, bias kernels.Buffer, n, c, h, wd, o, k, stride, pad int) (yd, xd, wdd, bd []float32, err error) {
	yd, xd, wdd = be.raw(y), be.raw(x), be.data(w)
	bl := -1
	if bias != nil {
		bd = be.data(bias)
		bl = len(bd)
	}
	if be.lib == nil {
		return nil, nil, nil, nil, kernels.UnsupportedConv(op, c, h, wd, o, k, pad)
	}
	if err := kernels.CheckWholeConv(op, len(yd), len(xd), len(wdd), bl, n, c, h, wd, o, k, stride, pad); err != nil {
		return nil, nil, nil, nil, err
	}
	return yd, xd, wdd, bd, nil
}

// ConvForward: see kernels.WholeConvOps. y is left in the library's
// layout.
func (be *Backend) ConvForward(y, x, w, bias kernels.Buffer, n, c, h, wd, o, k, stride, pad int) error {
	yd, xd, wdd, bd, err := be.wholeArgs("cpu.ConvForward", y, x, w, bias, n, c, h, wd, o, k, stride, pad)
	if err != nil || n == 0 {
		return err
	}
	xl := be.layoutOf(xd)
	be.output(yd)
	yl, err := be.lib.ConvForward(yd, be.rounded(0, xd), be.rounded(1, wdd), bd, xl, n, c, h, wd, o, k, stride, pad)
	be.setLayout(yd, yl)
	return err
}

// ConvBackwardData: see kernels.WholeConvOps. dx is left in the library's
// layout.
func (be *Backend) ConvBackwardData(dx, dy, w kernels.Buffer, n, c, h, wd, o, k, stride, pad int) error {
	yd, xd, wdd, _, err := be.wholeArgs("cpu.ConvBackwardData", dy, dx, w, nil, n, c, h, wd, o, k, stride, pad)
	if err != nil || n == 0 {
		return err
	}
	yl := be.layoutOf(yd)
	be.output(xd)
	xl, err := be.lib.ConvBackwardData(xd, be.rounded(0, yd), be.rounded(1, wdd), yl, n, c, h, wd, o, k, stride, pad)
	be.setLayout(xd, xl)
	return err
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
	xl, yl := be.layoutOf(xd), be.layoutOf(yd)
	return be.lib.ConvBackwardFilter(wdd, bd, be.rounded(0, xd), be.rounded(1, yd), xl, yl, n, c, h, wd, o, k, stride, pad)
}
