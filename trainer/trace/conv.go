package trace

import (
	"fmt"

	"github.com/dml-project/dml/kernels"
)

// The traced backend passes kernels.ConvOps through, with a span per op
// (its shape arguments: n, c, h, w, k, stride, pad, or planes, h, w, k,
// stride, or a, b, inner). kernels.ConvOf looks through the decorator (Unwrap) to decide
// whether the ops exist; called on a backend without them, they fail.

var _ kernels.ConvOps = (*tracedBackend)(nil)

// opSpan runs f on the backend as the optional op set T in a span named
// op with args (name, int value pairs), failing with ErrNoConv where the
// backend lacks T. Every op set's spans are made here.
func opSpan[T any](tb *tracedBackend, op string, f func(T) error, args ...any) error {
	sp := tb.t.Begin(op).Cat(Compute)
	var err error
	if o, ok := tb.b.(T); ok {
		err = f(o)
	} else {
		err = fmt.Errorf("%s on backend %s: %w", op, tb.b.Name(), kernels.ErrNoConv)
	}
	for i := 0; i+1 < len(args); i += 2 {
		sp = sp.Arg(args[i].(string), args[i+1].(int))
	}
	sp.Err(err).End()
	return err
}

func (tb *tracedBackend) convSpan(op string, f func(kernels.ConvOps) error, args ...any) error {
	return opSpan(tb, op, f, args...)
}

func (tb *tracedBackend) Im2col(cols, x kernels.Buffer, n, c, h, w, k, stride, pad int) error {
	return tb.convSpan("Im2col", func(cv kernels.ConvOps) error { return cv.Im2col(cols, x, n, c, h, w, k, stride, pad) },
		"n", n, "c", c, "h", h, "w", w, "k", k, "stride", stride, "pad", pad)
}

func (tb *tracedBackend) Col2im(dx, cols kernels.Buffer, n, c, h, w, k, stride, pad int) error {
	return tb.convSpan("Col2im", func(cv kernels.ConvOps) error { return cv.Col2im(dx, cols, n, c, h, w, k, stride, pad) },
		"n", n, "c", c, "h", h, "w", w, "k", k, "stride", stride, "pad", pad)
}

func (tb *tracedBackend) Transpose01(dst, src kernels.Buffer, a, b, inner int) error {
	return tb.convSpan("Transpose01", func(cv kernels.ConvOps) error { return cv.Transpose01(dst, src, a, b, inner) },
		"a", a, "b", b, "inner", inner)
}

func (tb *tracedBackend) MaxPool(y, x kernels.Buffer, planes, h, w, k, stride int) error {
	return tb.convSpan("MaxPool", func(cv kernels.ConvOps) error { return cv.MaxPool(y, x, planes, h, w, k, stride) },
		"planes", planes, "h", h, "w", w, "k", k, "stride", stride)
}

func (tb *tracedBackend) MaxPoolGrad(dx, dy, x kernels.Buffer, planes, h, w, k, stride int) error {
	return tb.convSpan("MaxPoolGrad", func(cv kernels.ConvOps) error { return cv.MaxPoolGrad(dx, dy, x, planes, h, w, k, stride) },
		"planes", planes, "h", h, "w", w, "k", k, "stride", stride)
}

func (tb *tracedBackend) AvgPool(y, x kernels.Buffer, planes, h, w, k, stride int) error {
	return tb.convSpan("AvgPool", func(cv kernels.ConvOps) error { return cv.AvgPool(y, x, planes, h, w, k, stride) },
		"planes", planes, "h", h, "w", w, "k", k, "stride", stride)
}

func (tb *tracedBackend) AvgPoolGrad(dx, dy kernels.Buffer, planes, h, w, k, stride int) error {
	return tb.convSpan("AvgPoolGrad", func(cv kernels.ConvOps) error { return cv.AvgPoolGrad(dx, dy, planes, h, w, k, stride) },
		"planes", planes, "h", h, "w", w, "k", k, "stride", stride)
}

var _ kernels.NormOps = (*tracedBackend)(nil)

func (tb *tracedBackend) normSpan(op string, f func(kernels.NormOps) error, n, c, hw int) error {
	return opSpan(tb, op, f, "n", n, "c", c, "hw", hw)
}

func (tb *tracedBackend) BatchNormTrain(y, mean, invstd, runMean, runVar, x, gamma, beta kernels.Buffer, n, c, hw int, eps, momentum float32) error {
	return tb.normSpan("BatchNormTrain", func(nb kernels.NormOps) error {
		return nb.BatchNormTrain(y, mean, invstd, runMean, runVar, x, gamma, beta, n, c, hw, eps, momentum)
	}, n, c, hw)
}

func (tb *tracedBackend) BatchNormInfer(y, x, runMean, runVar, gamma, beta kernels.Buffer, n, c, hw int, eps float32) error {
	return tb.normSpan("BatchNormInfer", func(nb kernels.NormOps) error {
		return nb.BatchNormInfer(y, x, runMean, runVar, gamma, beta, n, c, hw, eps)
	}, n, c, hw)
}

func (tb *tracedBackend) BatchNormGrad(dx, dgamma, dbeta, dy, x, mean, invstd, gamma kernels.Buffer, n, c, hw int) error {
	return tb.normSpan("BatchNormGrad", func(nb kernels.NormOps) error {
		return nb.BatchNormGrad(dx, dgamma, dbeta, dy, x, mean, invstd, gamma, n, c, hw)
	}, n, c, hw)
}

var _ kernels.NormReluOps = (*tracedBackend)(nil)

// NormRelu passes the backend's answer through (false without the op
// set).
func (tb *tracedBackend) NormRelu() bool {
	f, ok := tb.b.(kernels.NormReluOps)
	return ok && f.NormRelu()
}

func (tb *tracedBackend) normReluSpan(op string, f func(kernels.NormReluOps) error, n, c, hw int) error {
	return opSpan(tb, op, f, "n", n, "c", c, "hw", hw)
}

func (tb *tracedBackend) BatchNormReluTrain(y, mean, invstd, runMean, runVar, x, gamma, beta kernels.Buffer, n, c, hw int, eps, momentum float32) error {
	return tb.normReluSpan("BatchNormReluTrain", func(nr kernels.NormReluOps) error {
		return nr.BatchNormReluTrain(y, mean, invstd, runMean, runVar, x, gamma, beta, n, c, hw, eps, momentum)
	}, n, c, hw)
}

func (tb *tracedBackend) BatchNormReluGrad(dx, dgamma, dbeta, dy, y, x, mean, invstd, gamma kernels.Buffer, n, c, hw int) error {
	return tb.normReluSpan("BatchNormReluGrad", func(nr kernels.NormReluOps) error {
		return nr.BatchNormReluGrad(dx, dgamma, dbeta, dy, y, x, mean, invstd, gamma, n, c, hw)
	}, n, c, hw)
}

var _ kernels.DirectConvOps = (*tracedBackend)(nil)

// ConvSupports passes the backend's answer through (false without the
// op set).
func (tb *tracedBackend) ConvSupports(c, h, w, o, k, pad int) bool {
	d, ok := tb.b.(kernels.DirectConvOps)
	return ok && d.ConvSupports(c, h, w, o, k, pad)
}

func (tb *tracedBackend) directSpan(op string, f func(kernels.DirectConvOps) error, n, c, h, w, o, k, pad int) error {
	return opSpan(tb, op, f, "n", n, "c", c, "h", h, "w", w, "o", o, "k", k, "pad", pad)
}

func (tb *tracedBackend) Conv(y, x, wt, bias kernels.Buffer, n, c, h, w, o, k, pad int) error {
	return tb.directSpan("Conv", func(d kernels.DirectConvOps) error { return d.Conv(y, x, wt, bias, n, c, h, w, o, k, pad) }, n, c, h, w, o, k, pad)
}

func (tb *tracedBackend) ConvFilter(dw, db, x, dy kernels.Buffer, n, c, h, w, o, k, pad int) error {
	return tb.directSpan("ConvFilter", func(d kernels.DirectConvOps) error { return d.ConvFilter(dw, db, x, dy, n, c, h, w, o, k, pad) }, n, c, h, w, o, k, pad)
}

var _ kernels.WholeConvOps = (*tracedBackend)(nil)

// WholeConv passes the backend's answer through (false without the op
// set).
func (tb *tracedBackend) WholeConv() bool {
	w, ok := tb.b.(kernels.WholeConvOps)
	return ok && w.WholeConv()
}

func (tb *tracedBackend) wholeSpan(op string, f func(kernels.WholeConvOps) error, n, c, h, w, o, k, stride, pad int) error {
	return opSpan(tb, op, f, "n", n, "c", c, "h", h, "w", w, "o", o, "k", k, "stride", stride, "pad", pad)
}

func (tb *tracedBackend) ConvForward(y, x, wt, bias kernels.Buffer, n, c, h, w, o, k, stride, pad int) error {
	return tb.wholeSpan("ConvForward", func(d kernels.WholeConvOps) error {
		return d.ConvForward(y, x, wt, bias, n, c, h, w, o, k, stride, pad)
	}, n, c, h, w, o, k, stride, pad)
}

func (tb *tracedBackend) ConvBackwardData(dx, dy, wt kernels.Buffer, n, c, h, w, o, k, stride, pad int) error {
	return tb.wholeSpan("ConvBackwardData", func(d kernels.WholeConvOps) error {
		return d.ConvBackwardData(dx, dy, wt, n, c, h, w, o, k, stride, pad)
	}, n, c, h, w, o, k, stride, pad)
}

func (tb *tracedBackend) ConvBackwardFilter(dw, db, x, dy kernels.Buffer, n, c, h, w, o, k, stride, pad int) error {
	return tb.wholeSpan("ConvBackwardFilter", func(d kernels.WholeConvOps) error {
		return d.ConvBackwardFilter(dw, db, x, dy, n, c, h, w, o, k, stride, pad)
	}, n, c, h, w, o, k, stride, pad)
}

var _ kernels.PadPoolOps = (*tracedBackend)(nil)

func (tb *tracedBackend) MaxPoolPad(y, x kernels.Buffer, planes, h, w, k, stride, pad int) error {
	return opSpan(tb, "MaxPoolPad", func(p kernels.PadPoolOps) error { return p.MaxPoolPad(y, x, planes, h, w, k, stride, pad) },
		"planes", planes, "h", h, "w", w, "k", k, "stride", stride, "pad", pad)
}

func (tb *tracedBackend) MaxPoolPadGrad(dx, dy, x kernels.Buffer, planes, h, w, k, stride, pad int) error {
	return opSpan(tb, "MaxPoolPadGrad", func(p kernels.PadPoolOps) error { return p.MaxPoolPadGrad(dx, dy, x, planes, h, w, k, stride, pad) },
		"planes", planes, "h", h, "w", w, "k", k, "stride", stride, "pad", pad)
}

var _ kernels.LibPoolOps = (*tracedBackend)(nil)

// LibPool passes the backend's answer through (false without the op
// set).
func (tb *tracedBackend) LibPool() bool {
	p, ok := tb.b.(kernels.LibPoolOps)
	return ok && p.LibPool()
}

// poolOp names a pool's span as the ConvOps and PadPoolOps ones.
func poolOp(max bool, pad int, grad string) string {
	switch {
	case pad > 0:
		return "MaxPoolPad" + grad
	case max:
		return "MaxPool" + grad
	}
	return "AvgPool" + grad
}

func (tb *tracedBackend) Pool(y, x kernels.Buffer, max bool, n, c, h, w, k, stride, pad int) error {
	return opSpan(tb, poolOp(max, pad, ""), func(p kernels.LibPoolOps) error { return p.Pool(y, x, max, n, c, h, w, k, stride, pad) },
		"n", n, "c", c, "h", h, "w", w, "k", k, "stride", stride, "pad", pad)
}

func (tb *tracedBackend) PoolGrad(dx, dy, x kernels.Buffer, max bool, n, c, h, w, k, stride, pad int) error {
	return opSpan(tb, poolOp(max, pad, "Grad"), func(p kernels.LibPoolOps) error { return p.PoolGrad(dx, dy, x, max, n, c, h, w, k, stride, pad) },
		"n", n, "c", c, "h", h, "w", w, "k", k, "stride", stride, "pad", pad)
}

var _ kernels.LRNOps = (*tracedBackend)(nil)

func (tb *tracedBackend) LRN(y, s, x kernels.Buffer, n, c, hw, size int, alpha, beta, k float32) error {
	return opSpan(tb, "LRN", func(l kernels.LRNOps) error { return l.LRN(y, s, x, n, c, hw, size, alpha, beta, k) },
		"n", n, "c", c, "hw", hw, "size", size)
}

func (tb *tracedBackend) LRNGrad(dx, dy, x, s kernels.Buffer, n, c, hw, size int, alpha, beta, k float32) error {
	return opSpan(tb, "LRNGrad", func(l kernels.LRNOps) error { return l.LRNGrad(dx, dy, x, s, n, c, hw, size, alpha, beta, k) },
		"n", n, "c", c, "hw", hw, "size", size)
}

var _ kernels.SyncNormOps = (*tracedBackend)(nil)

func (tb *tracedBackend) BatchNormSums(sums, x kernels.Buffer, n, c, hw int) error {
	return opSpan(tb, "BatchNormSums", func(s kernels.SyncNormOps) error { return s.BatchNormSums(sums, x, n, c, hw) }, "n", n, "c", c, "hw", hw)
}

func (tb *tracedBackend) BatchNormTrainSums(y, mean, invstd, runMean, runVar, x, gamma, beta, sums kernels.Buffer, count, n, c, hw int, eps, momentum float32) error {
	return opSpan(tb, "BatchNormTrainSums", func(s kernels.SyncNormOps) error {
		return s.BatchNormTrainSums(y, mean, invstd, runMean, runVar, x, gamma, beta, sums, count, n, c, hw, eps, momentum)
	}, "n", n, "c", c, "hw", hw, "count", count)
}

func (tb *tracedBackend) BatchNormGradSums(sums, dy, x, mean, invstd kernels.Buffer, n, c, hw int) error {
	return opSpan(tb, "BatchNormGradSums", func(s kernels.SyncNormOps) error { return s.BatchNormGradSums(sums, dy, x, mean, invstd, n, c, hw) },
		"n", n, "c", c, "hw", hw)
}

func (tb *tracedBackend) BatchNormGradInput(dx, dy, x, mean, invstd, gamma, sums kernels.Buffer, count, n, c, hw int) error {
	return opSpan(tb, "BatchNormGradInput", func(s kernels.SyncNormOps) error {
		return s.BatchNormGradInput(dx, dy, x, mean, invstd, gamma, sums, count, n, c, hw)
	}, "n", n, "c", c, "hw", hw, "count", count)
}
