package kernelstest

import (
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
)

// NewWholeConvCPU is the cpu backend with kernels.WholeConvOps made of its
// own Im2col, Gemm, Transpose01 and Col2im (a stand-in for a library such
// as cuDNN, where none is): the suite's "WholeConv" checks run on it on
// any machine, so that the checks themselves are checked before they meet
// a library, and a model's whole-convolution path can be compared with its
// columns path on the CPU.
func NewWholeConvCPU() kernels.Backend { return wholeConv{cpu.New()} }

type wholeConv struct{ *cpu.Backend }

func (w wholeConv) WholeConv() bool { return true }

func (w wholeConv) ConvForward(y, x, wt, bias kernels.Buffer, n, c, h, wd, o, k, stride, pad int) error {
	if err := kernels.CheckWholeConv("ConvForward", y.Len(), x.Len(), wt.Len(), lenOrNone(bias), n, c, h, wd, o, k, stride, pad); err != nil {
		return err
	}
	oh, ow := kernels.ConvOut(h, wd, k, stride, pad)
	p := n * oh * ow
	cols, yt := w.mustAlloc(c*k*k*p), w.mustAlloc(o*p)
	if err := w.Im2col(cols, x, n, c, h, wd, k, stride, pad); err != nil {
		return err
	}
	if err := w.Gemm(false, false, o, p, c*k*k, 1, wt, cols, 0, yt); err != nil {
		return err
	}
	if bias != nil {
		if err := w.Gemm(false, false, o, p, 1, 1, bias, w.ones(p), 1, yt); err != nil {
			return err
		}
	}
	return w.Transpose01(y, yt, o, n, oh*ow)
}

func (w wholeConv) ConvBackwardData(dx, dy, wt kernels.Buffer, n, c, h, wd, o, k, stride, pad int) error {
	dyt, p, err := w.backward("ConvBackwardData", dy, dx.Len(), wt.Len(), -1, n, c, h, wd, o, k, stride, pad)
	if err != nil {
		return err
	}
	cols := w.mustAlloc(c * k * k * p)
	if err := w.Gemm(true, false, c*k*k, p, o, 1, wt, dyt, 0, cols); err != nil {
		return err
	}
	return w.Col2im(dx, cols, n, c, h, wd, k, stride, pad)
}

func (w wholeConv) ConvBackwardFilter(dw, db, x, dy kernels.Buffer, n, c, h, wd, o, k, stride, pad int) error {
	dyt, p, err := w.backward("ConvBackwardFilter", dy, x.Len(), dw.Len(), lenOrNone(db), n, c, h, wd, o, k, stride, pad)
	if err != nil {
		return err
	}
	cols := w.mustAlloc(c * k * k * p)
	if err := w.Im2col(cols, x, n, c, h, wd, k, stride, pad); err != nil {
		return err
	}
	if err := w.Gemm(false, true, o, c*k*k, p, 1, dyt, cols, 0, dw); err != nil {
		return err
	}
	if db != nil {
		return w.Gemm(false, false, o, 1, p, 1, dyt, w.ones(p), 0, db)
	}
	return nil
}

// backward checks a gradient's buffers and returns dy in the GEMMs'
// layout (dyGEMM) and the output pixels of the batch.
func (w wholeConv) backward(op string, dy kernels.Buffer, xLen, wLen, bLen, n, c, h, wd, o, k, stride, pad int) (kernels.Buffer, int, error) {
	if err := kernels.CheckWholeConv(op, dy.Len(), xLen, wLen, bLen, n, c, h, wd, o, k, stride, pad); err != nil {
		return nil, 0, err
	}
	pix := pixels(h, wd, k, stride, pad)
	dyt, err := w.dyGEMM(dy, n, o, pix)
	return dyt, n * pix, err
}

// pixels is a convolution's output pixels per sample and channel.
func pixels(h, wd, k, stride, pad int) int {
	oh, ow := kernels.ConvOut(h, wd, k, stride, pad)
	return oh * ow
}

// dyGEMM is dy (n×o×pix) in the GEMMs' layout, o × n·pix.
func (w wholeConv) dyGEMM(dy kernels.Buffer, n, o, pix int) (kernels.Buffer, error) {
	dyt := w.mustAlloc(o * n * pix)
	return dyt, w.Transpose01(dyt, dy, n, o, pix)
}

// ones is p ones (the bias as a rank-1 GEMM).
func (w wholeConv) ones(p int) kernels.Buffer {
	b := w.mustAlloc(p)
	w.Fill(b, 1)
	return b
}

func lenOrNone(b kernels.Buffer) int {
	if b == nil {
		return -1
	}
	return b.Len()
}

func (w wholeConv) mustAlloc(n int) kernels.Buffer {
	b, err := w.Alloc(n)
	if err != nil {
		panic(err)
	}
	return b
}
