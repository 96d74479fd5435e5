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
//   - accumulates Dot and the losses in float64;
//   - lets Sum's dst be its first or second source.
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
	// blas runs Gemm. It is held here rather than taken from blas32's
	// process-wide implementation, so nothing outside can swap it.
	blas blas.Float32
}

// New returns a Backend whose Gemm runs on gonum's pure-Go BLAS.
func New() *Backend {
	return &Backend{blas: gonum.Implementation{}}
}

// Name returns "cpu".
func (be *Backend) Name() string { return "cpu" }

// Alloc returns a zeroed buffer of n elements. It panics if n < 0.
func (be *Backend) Alloc(n int) kernels.Buffer {
	if n < 0 {
		panic(fmt.Sprintf("cpu: Alloc(%d): negative length", n))
	}
	return &Buffer{data: make([]float32, n), owner: be}
}

// View returns the n elements of b starting at off, sharing b's memory. It
// panics unless 0 <= off, 0 <= n and off+n <= b.Len(): asking for elements a
// buffer does not have is a programmer error.
func (be *Backend) View(b kernels.Buffer, off, n int) kernels.Buffer {
	d := be.data(b)
	if off < 0 || n < 0 || off > len(d)-n {
		panic(fmt.Sprintf("cpu: View(off=%d, n=%d) out of range for a buffer of %d elements", off, n, len(d)))
	}
	return &Buffer{data: d[off : off+n : off+n], owner: be}
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
	d, s := be.data(dst), be.data(src)
	if err := checkLen("Copy", "src", len(s), len(d)); err != nil {
		return err
	}
	copy(d, s)
	return nil
}

// Fill sets every element of b to v.
func (be *Backend) Fill(b kernels.Buffer, v float32) {
	d := be.data(b)
	for i := range d {
		d[i] = v
	}
}

// data returns the memory behind b, panicking if this Backend did not
// allocate it.
func (be *Backend) data(b kernels.Buffer) []float32 {
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
	return cb.data
}
