// Package cpu is the pure-Go kernels.Backend: buffers live in host memory,
// Gemm runs on gonum's pure-Go BLAS (gonum.org/v1/gonum/blas/gonum) and every
// other op is a plain loop. It is the backend for machines without a GPU.
//
// Where kernels.Backend leaves a choice open, this backend:
//   - panics when View asks for elements outside its buffer, and when handed
//     a buffer that this Backend did not allocate (another backend's, or
//     another cpu.Backend's);
//   - treats beta == 0 in Gemm and SumRows as "overwrite" (the BLAS
//     convention, which kernelstest asks of every backend): the old output
//     is not read, so NaNs left in a reused buffer do not leak through;
//   - lets Relu propagate NaN, so NonFinite still sees a diverged layer;
//   - breaks argmax ties (Predict, the correct count) towards the first index;
//   - accumulates Dot and the losses in float64, and stores the loss sum
//     rounded to float32 in stats;
//   - lets Sum's dst be its first or second source;
//   - runs every op before returning, so Sync has nothing to wait for and
//     never fails;
//   - panics when a buffer is used after Free (its own or a view's), when
//     Free is given a View or a buffer freed already, and when any op is
//     called after Close: each is a programmer error;
//   - implements kernels.HostBuffer: (*Buffer).Data is the memory itself.
package cpu

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/dml-project/dml/kernels"
)

var _ kernels.Backend = (*Backend)(nil)

// Backend is the pure-Go implementation of kernels.Backend. Create one with
// New; the zero value is not usable. Like every kernels.Backend it is used by
// one goroutine at a time (Gemm itself may use several).
type Backend struct {
	// name is what Name returns: "cpu", or the name NewWithGemm was given.
	name string
	// blas runs Gemm. It is held here rather than taken from blas32's
	// process-wide implementation, so nothing outside can swap it.
	blas Sgemmer
	// lib, when not nil, serves the whole convolutions and batch norm
	// (lib.go), and lay remembers the buffers it left in its own layouts
	// (layout.go).
	lib   Lib
	trial bool // lib's convolutions are candidates (SetLibOnTrial)
	lay   layouts
	// normVar is the library's batch-norm variances, by the mean's
	// buffer (norm.go).
	normVar map[*float32]normSaved
	// poolWS is the library's max pools' workspaces, by the input's
	// buffer (libpool.go).
	poolWS map[*float32]poolSaved
	// prec is the products' arithmetic, and scratch the rounded copies of
	// their operands at BF16 and FP16 (precision.go).
	prec    kernels.Precision
	scratch [2][]float32
	// wide is float64 scratch of the ops that keep a plane or a sample of
	// sums (lrn.go), reused from call to call (f64).
	wide [3][]float64
	// closed is set by Close; every later call panics.
	closed bool
}

func init() {
	kernels.Register("cpu", func(o kernels.Options) (kernels.Backend, error) {
		be := New()
		be.SetPrecision(o.Precision)
		return be, nil
	})
}

// Sgemmer is the single-precision matrix product Gemm runs on, with the
// signature of gonum's blas.Float32.Sgemm (row-major; gonum's pure-Go
// implementation satisfies it). Gemm calls it only with m, n, k ≥ 1 and
// alpha ≠ 0, with slices of exactly the lengths the shapes need, and lda,
// ldb, ldc the row lengths of the contiguous matrices.
type Sgemmer interface {
	Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
}

// New returns a Backend whose Gemm runs on gonum's pure-Go BLAS.
func New() *Backend {
	return NewWithGemm("cpu", gonum.Implementation{})
}

// NewWithGemm returns a Backend named name whose Gemm runs on g; every
// other op is this package's (package kernels/blas builds the OpenBLAS
// backend this way). Buffers of one Backend are foreign to every other.
func NewWithGemm(name string, g Sgemmer) *Backend {
	return &Backend{name: name, blas: g}
}

// Name returns "cpu", or the name given to NewWithGemm.
func (be *Backend) Name() string { return be.name }

// Alloc returns a zeroed buffer of n elements. A negative n is an error
// wrapping kernels.ErrShape.
func (be *Backend) Alloc(n int) (kernels.Buffer, error) {
	be.live()
	if n < 0 {
		return nil, shapeError("Alloc", "negative length %d", n)
	}
	return &Buffer{data: make([]float32, n), owner: be, mem: &allocation{}}, nil
}

// Free releases a buffer from Alloc: the buffer and its views must not be
// used afterwards (they panic if they are). Free(nil) does nothing; freeing
// a View, or a buffer twice, panics.
func (be *Backend) Free(b kernels.Buffer) error {
	if b == nil {
		return nil
	}
	if cb, ok := b.(*Buffer); ok && cb == nil {
		return nil
	}
	be.forget(be.raw(b)) // checks ownership, and not freed already
	be.forgetSaved(be.raw(b))
	cb := b.(*Buffer)
	if cb.view {
		panic("cpu: Free of a View (free the buffer it views instead)")
	}
	cb.mem.freed = true
	cb.data = nil
	return nil
}

// Sync returns nil: every op has finished by the time it returns.
func (be *Backend) Sync() error {
	be.live()
	return nil
}

// Close ends the backend: every later call panics. Its buffers' memory goes
// back to the Go heap once they are no longer referenced.
func (be *Backend) Close() error {
	be.live()
	be.closed = true
	if be.lib != nil {
		be.lib.Close()
		be.lib = nil
	}
	return nil
}

// View returns the n elements of b starting at off, sharing b's memory. It
// panics unless 0 <= off, 0 <= n and off+n <= b.Len(): asking for elements a
// buffer does not have is a programmer error.
func (be *Backend) View(b kernels.Buffer, off, n int) kernels.Buffer {
	d := be.raw(b)
	if off < 0 || n < 0 || off > len(d)-n {
		panic(fmt.Sprintf("cpu: View(off=%d, n=%d) out of range for a buffer of %d elements", off, n, len(d)))
	}
	return &Buffer{data: d[off : off+n : off+n], owner: be, mem: b.(*Buffer).mem, view: true}
}

// Upload copies src into dst; lengths must match.
func (be *Backend) Upload(dst kernels.Buffer, src []float32) error {
	d := be.data(dst)
	if err := checkLen("Upload", "src", len(src), len(d)); err != nil {
		return err
	}
	copy(d, src)
	return nil
}

// Download copies src into dst; lengths must match.
func (be *Backend) Download(dst []float32, src kernels.Buffer) error {
	s := be.data(src)
	if err := checkLen("Download", "dst", len(dst), len(s)); err != nil {
		return err
	}
	copy(dst, s)
	return nil
}

// Copy copies src into dst; lengths must match. dst and src may overlap.
func (be *Backend) Copy(dst, src kernels.Buffer) error {
	d, s := be.raw(dst), be.raw(src)
	if err := checkLen("Copy", "src", len(s), len(d)); err != nil {
		return err
	}
	l := be.unify(s)
	be.output(d)
	copy(d, s)
	be.setLayout(d, l)
	return nil
}

// Fill sets every element of b to v (in any layout: the same).
func (be *Backend) Fill(b kernels.Buffer, v float32) error {
	d := be.raw(b)
	for i := range d {
		d[i] = v
	}
	return nil
}

// live panics if the backend was closed.
func (be *Backend) live() {
	if be.closed {
		panic("cpu: Backend used after Close")
	}
}

// data returns the memory behind b, in plain layout (layout.go),
// panicking if this Backend did not allocate it, if it (or the buffer it
// views) was freed, or if the backend was closed.
func (be *Backend) data(b kernels.Buffer) []float32 {
	d := be.raw(b)
	be.plain(d)
	return d
}

// raw is data without the reorder: the memory as it lies.
func (be *Backend) raw(b kernels.Buffer) []float32 {
	be.live()
	cb, ok := b.(*Buffer)
	if !ok {
		panic(fmt.Sprintf("cpu: buffer of type %T was not allocated by a cpu.Backend", b))
	}
	if cb == nil {
		panic("cpu: nil *cpu.Buffer")
	}
	if cb.owner != be {
		panic("cpu: buffer was allocated by a different cpu.Backend")
	}
	if cb.mem.freed {
		panic("cpu: buffer used after Free")
	}
	return cb.data
}
