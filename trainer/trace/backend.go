package trace

import (
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/optim"
)

// Backend returns b with a span around every op, named as the method
// ("Gemm", "Upload"), with its shapes as arguments: m, n, k, trans_a,
// trans_b for Gemm; rows and cols for the row-wise ops; n, the element
// count, for element-wise ones (and srcs for Sum); bytes for Upload,
// Download and Copy. Name and View, which do no work, are passed through
// without a span. Buffers are the wrapped backend's own: nothing is wrapped
// but the Backend, so kernels.HostBuffer and the buffers' types are seen as
// before. Arguments and results pass through unchanged, errors included; a
// span whose op failed carries the error.
//
// Categories: Upload and Download are IO, Sync is Wait, Optimize is
// Update, everything else Compute.
//
// What a span measures: the time the op took to return. For the CPU backend
// that is the op itself. A device backend returns once the op is queued, so
// its spans measure enqueue time, and the device time shows up in whatever
// waits for it (Download, Dot, NonFinite, Sync); a timeline of device time
// needs the backend's own events (CUDA events), not this decorator, or a
// backend that syncs after every op.
//
// With t nil or Nop, Backend returns b itself: tracing off costs nothing.
// Shapes are read after the op returns (Buffer.Len of a nil buffer is
// recorded as -1), so a span never changes what the op sees or returns.
func Backend(b kernels.Backend, t Tracer) kernels.Backend {
	if !Enabled(t) {
		return b
	}
	return &tracedBackend{b: b, t: t}
}

var (
	_ kernels.Backend            = (*tracedBackend)(nil)
	_ Unwrapper[kernels.Backend] = (*tracedBackend)(nil)
)

type tracedBackend struct {
	b kernels.Backend
	t Tracer
}

// blen is b.Len(), or -1 for a nil buffer.
func blen(b kernels.Buffer) int {
	if b == nil {
		return -1
	}
	return b.Len()
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

func (tb *tracedBackend) Unwrap() kernels.Backend { return tb.b }

func (tb *tracedBackend) Name() string { return tb.b.Name() }

func (tb *tracedBackend) View(b kernels.Buffer, off, n int) kernels.Buffer {
	return tb.b.View(b, off, n)
}

func (tb *tracedBackend) Alloc(n int) (kernels.Buffer, error) {
	sp := tb.t.Begin("Alloc").Cat(Compute)
	buf, err := tb.b.Alloc(n)
	sp.Arg("n", n).Err(err).End()
	return buf, err
}

func (tb *tracedBackend) Free(b kernels.Buffer) error {
	n := blen(b) // a freed buffer must not be used, Len included
	sp := tb.t.Begin("Free").Cat(Compute)
	err := tb.b.Free(b)
	sp.Arg("n", n).Err(err).End()
	return err
}

func (tb *tracedBackend) Upload(dst kernels.Buffer, src []float32) error {
	sp := tb.t.Begin("Upload").Cat(IO)
	err := tb.b.Upload(dst, src)
	sp.Bytes(4 * len(src)).Err(err).End()
	return err
}

func (tb *tracedBackend) Download(dst []float32, src kernels.Buffer) error {
	sp := tb.t.Begin("Download").Cat(IO)
	err := tb.b.Download(dst, src)
	sp.Bytes(4 * len(dst)).Err(err).End()
	return err
}

func (tb *tracedBackend) Copy(dst, src kernels.Buffer) error {
	sp := tb.t.Begin("Copy").Cat(Compute)
	err := tb.b.Copy(dst, src)
	sp.Bytes(4 * blen(src)).Err(err).End()
	return err
}

func (tb *tracedBackend) Fill(b kernels.Buffer, v float32) error {
	sp := tb.t.Begin("Fill").Cat(Compute)
	err := tb.b.Fill(b, v)
	sp.Arg("n", blen(b)).Err(err).End()
	return err
}

func (tb *tracedBackend) Sync() error {
	sp := tb.t.Begin("Sync").Cat(Wait)
	err := tb.b.Sync()
	sp.Err(err).End()
	return err
}

func (tb *tracedBackend) Close() error {
	sp := tb.t.Begin("Close").Cat(Compute)
	err := tb.b.Close()
	sp.Err(err).End()
	return err
}

func (tb *tracedBackend) Gemm(transA, transB bool, m, n, k int, alpha float32, a, b kernels.Buffer, beta float32, c kernels.Buffer) error {
	sp := tb.t.Begin("Gemm").Cat(Compute)
	err := tb.b.Gemm(transA, transB, m, n, k, alpha, a, b, beta, c)
	sp.Arg("m", m).Arg("n", n).Arg("k", k).Arg("trans_a", b2i(transA)).Arg("trans_b", b2i(transB)).Err(err).End()
	return err
}

func (tb *tracedBackend) AddBias(x, bias kernels.Buffer, rows, cols int) error {
	sp := tb.t.Begin("AddBias").Cat(Compute)
	err := tb.b.AddBias(x, bias, rows, cols)
	sp.Arg("rows", rows).Arg("cols", cols).Err(err).End()
	return err
}

func (tb *tracedBackend) SumRows(dst, x kernels.Buffer, rows, cols int, beta float32) error {
	sp := tb.t.Begin("SumRows").Cat(Compute)
	err := tb.b.SumRows(dst, x, rows, cols, beta)
	sp.Arg("rows", rows).Arg("cols", cols).Err(err).End()
	return err
}

func (tb *tracedBackend) Relu(y, x kernels.Buffer) error {
	sp := tb.t.Begin("Relu").Cat(Compute)
	err := tb.b.Relu(y, x)
	sp.Arg("n", blen(x)).Err(err).End()
	return err
}

func (tb *tracedBackend) ReluGrad(dx, dy, y kernels.Buffer) error {
	sp := tb.t.Begin("ReluGrad").Cat(Compute)
	err := tb.b.ReluGrad(dx, dy, y)
	sp.Arg("n", blen(y)).Err(err).End()
	return err
}

func (tb *tracedBackend) SoftmaxCrossEntropy(grad, logits, labels kernels.Buffer, rows, cols int, scale float32, stats kernels.Buffer) error {
	sp := tb.t.Begin("SoftmaxCrossEntropy").Cat(Compute)
	err := tb.b.SoftmaxCrossEntropy(grad, logits, labels, rows, cols, scale, stats)
	sp.Arg("rows", rows).Arg("cols", cols).Err(err).End()
	return err
}

func (tb *tracedBackend) SigmoidCrossEntropy(grad, logits, labels kernels.Buffer, rows int, scale float32, stats kernels.Buffer) error {
	sp := tb.t.Begin("SigmoidCrossEntropy").Cat(Compute)
	err := tb.b.SigmoidCrossEntropy(grad, logits, labels, rows, scale, stats)
	sp.Arg("rows", rows).Err(err).End()
	return err
}

func (tb *tracedBackend) Predict(out, x kernels.Buffer, rows, cols int) error {
	sp := tb.t.Begin("Predict").Cat(Compute)
	err := tb.b.Predict(out, x, rows, cols)
	sp.Arg("rows", rows).Arg("cols", cols).Err(err).End()
	return err
}

func (tb *tracedBackend) Axpy(alpha float32, x, y kernels.Buffer) error {
	sp := tb.t.Begin("Axpy").Cat(Compute)
	err := tb.b.Axpy(alpha, x, y)
	sp.Arg("n", blen(y)).Err(err).End()
	return err
}

func (tb *tracedBackend) Scale(alpha float32, x kernels.Buffer) error {
	sp := tb.t.Begin("Scale").Cat(Compute)
	err := tb.b.Scale(alpha, x)
	sp.Arg("n", blen(x)).Err(err).End()
	return err
}

func (tb *tracedBackend) Sum(dst kernels.Buffer, srcs ...kernels.Buffer) error {
	sp := tb.t.Begin("Sum").Cat(Compute)
	err := tb.b.Sum(dst, srcs...)
	sp.Arg("n", blen(dst)).Arg("srcs", len(srcs)).Err(err).End()
	return err
}

func (tb *tracedBackend) Dot(x, y kernels.Buffer) (float64, error) {
	sp := tb.t.Begin("Dot").Cat(Compute)
	v, err := tb.b.Dot(x, y)
	sp.Arg("n", blen(x)).Err(err).End()
	return v, err
}

func (tb *tracedBackend) NonFinite(x kernels.Buffer) (int, error) {
	sp := tb.t.Begin("NonFinite").Cat(Compute)
	i, err := tb.b.NonFinite(x)
	sp.Arg("n", blen(x)).Err(err).End()
	return i, err
}

// Optimize is one Update span, named "Optimize", its arg "rule" the
// optim.Kind.
func (tb *tracedBackend) Optimize(w, g, st kernels.Buffer, u optim.Update) error {
	sp := tb.t.Begin("Optimize").Cat(Update)
	err := tb.b.Optimize(w, g, st, u)
	sp.Arg("rule", int(u.Kind)).Arg("n", blen(w)).Err(err).End()
	return err
}
