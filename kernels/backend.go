// Package kernels defines the Backend seam: the op set a model needs for its
// forward and backward passes and its optimizer updates. Models call these
// ops and nothing else, so the pure-Go CPU backend (package kernels/cpu) and
// the CUDA backend (package cuda, build tag cuda) are interchangeable.
//
// The seam is shaped for a device that runs ops asynchronously on a queue
// (a CUDA stream): no op inside a training step hands a value back to the
// host. Labels live in a Buffer, uploaded with the inputs; the loss ops write
// their loss sum and correct count into a Buffer (the two slots after the
// gradient in the fused AllReduce buffer); the host reads results only
// through Download, which waits for the work queued before it.
//
// Conventions for every op:
//   - Matrices are row-major and contiguous: an r×c matrix is a Buffer of
//     r*c elements, element (i, j) at i*c+j.
//   - Buffers are owned by the Backend that allocated them; passing a
//     buffer from another backend is a programmer error (panic).
//   - Shapes are validated on the host before any work is queued; a mismatch
//     returns an error wrapping ErrShape and leaves every output untouched.
//   - Outputs may not alias inputs unless the op says so.
//   - beta == 0 (Gemm, SumRows) means "overwrite": whatever the output held,
//     NaN included, does not leak through (the BLAS and cuBLAS convention).
//   - Upload, Download and Copy move every bit unchanged.
//   - Wrong sizes never panic, even when a product of dimensions overflows.
//   - Labels are class indices stored as float32 values (exact for indices
//     below 2^24), so they travel in the same kind of Buffer as the data.
//   - An op may return before its work is done (a device queues it). An
//     error the device reports later (a failed launch, a fault) comes back
//     from a later op, Download or Sync; every error names the op and its
//     shapes, and wraps ErrDevice when the device itself failed.
package kernels

import (
	"errors"

	"github.com/dml-project/dml/kernels/optim"
)

// ErrShape reports arguments whose lengths do not fit the shapes given.
var ErrShape = errors.New("kernels: shape mismatch")

// ErrDevice reports a failure of the device behind a Backend: out of
// memory, a failed launch or copy, a lost context.
var ErrDevice = errors.New("kernels: device error")

// Buffer is a vector of float32 owned by a Backend (host memory for the CPU
// backend, device memory for CUDA).
type Buffer interface {
	// Len is the number of float32 elements.
	Len() int
}

// Backend is the op set. A Backend is used by one goroutine at a time; ops
// run in the order they are called.
type Backend interface {
	// Name identifies the backend ("cpu", "cuda").
	Name() string

	// Alloc returns a zeroed buffer of n elements (n >= 0). A device that
	// cannot hold it returns an error wrapping ErrDevice.
	Alloc(n int) (Buffer, error)
	// Free releases a buffer from Alloc (not a View); the buffer and every
	// view of it must not be used afterwards. Free(nil) does nothing.
	Free(b Buffer) error
	// View returns the n elements of b starting at off, sharing b's memory.
	// Asking for elements outside b is a programmer error (panic).
	View(b Buffer, off, n int) Buffer
	// Upload copies src (host) into dst; lengths must match. src may be
	// reused as soon as Upload returns.
	Upload(dst Buffer, src []float32) error
	// Download copies src into dst (host); lengths must match. It waits
	// for every op queued before it, so dst is complete when it returns.
	Download(dst []float32, src Buffer) error
	// Copy copies src into dst; lengths must match.
	Copy(dst, src Buffer) error
	// Fill sets every element of b to v.
	Fill(b Buffer, v float32) error
	// Sync waits until every op queued so far has finished and returns the
	// first error the device reported since the last Sync, if any.
	Sync() error
	// Close releases everything the backend holds (its buffers, its device
	// context). The backend must not be used afterwards.
	Close() error

	// Gemm computes C = alpha·op(A)·op(B) + beta·C where op(A) is m×k,
	// op(B) is k×n and C is m×n. transA means A is stored k×m and op(A)=Aᵀ;
	// likewise transB (B stored n×k).
	Gemm(transA, transB bool, m, n, k int, alpha float32, a, b Buffer, beta float32, c Buffer) error
	// AddBias adds bias[j] to every x[i, j] of the rows×cols matrix x, in place.
	AddBias(x, bias Buffer, rows, cols int) error
	// SumRows sets dst[j] = beta·dst[j] + Σ_i x[i, j] for the rows×cols matrix x
	// (the bias gradient).
	SumRows(dst, x Buffer, rows, cols int, beta float32) error

	// Relu sets y = max(x, 0); y may alias x.
	Relu(y, x Buffer) error
	// ReluGrad sets dx = dy where y > 0, else 0 (y is the Relu output);
	// dx may alias dy.
	ReluGrad(dx, dy, y Buffer) error

	// SoftmaxCrossEntropy takes logits, a rows×cols matrix, and labels, a
	// buffer of rows class indices in [0, cols). It writes
	// grad = scale·(softmax(logits) − onehot(labels)), and into stats (2
	// elements) the summed (not averaged) cross-entropy loss over the rows
	// and the number of rows whose argmax (the first, on ties) equals the
	// label. grad may alias logits. A label outside [0, cols) is an error
	// the CPU backend returns before writing; a device backend, which cannot
	// see it without waiting, makes stats[0] NaN instead, so that the
	// non-finite check stops training.
	SoftmaxCrossEntropy(grad, logits, labels Buffer, rows, cols int, scale float32, stats Buffer) error
	// SigmoidCrossEntropy is the binary logistic loss for one logit per row
	// (logits has rows elements) and labels in {0, 1}: grad = scale·(σ(z) − y);
	// stats receives the summed loss and the number of rows where
	// (z > 0) == (y == 1). grad may alias logits. Bad labels as for
	// SoftmaxCrossEntropy.
	SigmoidCrossEntropy(grad, logits, labels Buffer, rows int, scale float32, stats Buffer) error
	// Predict writes the argmax (the first, on ties) of each row of the
	// rows×cols matrix x into out, rows elements, as float32 class indices
	// (for cols == 1: 1 if x > 0 else 0).
	Predict(out, x Buffer, rows, cols int) error

	// Axpy sets y += alpha·x.
	Axpy(alpha float32, x, y Buffer) error
	// Scale sets x *= alpha.
	Scale(alpha float32, x Buffer) error
	// Sum sets dst = Σ srcs element-wise (the reduction of gradient buffers);
	// dst may be one of the srcs, so Sum(acc, acc, g) accumulates.
	Sum(dst Buffer, srcs ...Buffer) error
	// Dot returns Σ x·y as a float64 (used for norms and checks, never
	// inside a step: it waits for the device). The CPU backend accumulates
	// in float64.
	Dot(x, y Buffer) (float64, error)
	// NonFinite returns the index of the first NaN or ±Inf in x, or -1. It
	// waits for the device; the training step checks the host copy of the
	// gradient instead.
	NonFinite(x Buffer) (int, error)

	// Optimize applies one optimizer update u (optim.NewUpdate: the rule
	// and its constants, computed once on the host) to the weights w with
	// gradient g and the rule's state s (u.Kind.StatePer()·w.Len() floats:
	// the momentum or LARS velocity, Adagrad's sum of squares, Adam's m and
	// v interleaved; ignored, and may be nil, for SGD). A per-tensor rule
	// (LARS) takes all of w as one tensor: its norms are computed where the
	// buffers are, without waiting. The result is u.Apply's bit for bit.
	Optimize(w, g, s Buffer, u optim.Update) error
}

// OptimizeOp is the name a backend gives a call of Optimize with rule k
// in its errors and records: "Optimize(adam)". The names are made once:
// the op runs at every update.
func OptimizeOp(k optim.Kind) string {
	if k.Valid() {
		return optimizeOps[k]
	}
	return "Optimize(" + k.String() + ")"
}

var optimizeOps = func() []string {
	ops := make([]string, len(optim.Kinds))
	for _, k := range optim.Kinds {
		ops[k] = "Optimize(" + k.String() + ")"
	}
	return ops
}()

// HostBuffer is a Buffer that lives in host memory and shows it. Code that
// must hand a buffer to the host side (the gradient AllReduce) checks for
// it and skips the Download/Upload round trip; device buffers do not
// implement it.
type HostBuffer interface {
	Buffer
	// Data is the buffer's memory itself, not a copy.
	Data() []float32
}
