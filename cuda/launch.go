//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"strings"

	"github.com/dml-project/dml/kernels/ptx"
)

// Kernel arguments. Every parameter travels in an 8-byte slot (ABI.md):
// pointers and long long counts fill it, a float sits in its low half
// (the kernel reads 4 bytes; x86-64 and the GPU are little-endian).

func ptr(b *Buffer) uint64  { return b.ptr }
func i64(n int) uint64      { return uint64(int64(n)) }
func f32(v float32) uint64  { return uint64(math.Float32bits(v)) }
func f64(v float64) uint64  { return math.Float64bits(v) }
func ptrAt(p devPtr) uint64 { return p }
func ceilDiv(a, b int) int  { return (a + b - 1) / b }
func dimsString(d []int) string {
	s := make([]string, len(d))
	for i, v := range d {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ",")
}

// threads is the block size of every 1-D, row and reduction kernel: the
// row and reduction kernels require exactly ptx.RedThreads (they trap
// otherwise), the grid-stride ones take any.
const threads = ptx.RedThreads

// launch queues f on a gx×gy grid of bx-thread blocks with args, copied
// into the backend's 8-byte slots (so they do not escape per call).
func (be *Backend) launch(f function, gx, gy, bx int, args ...uint64) error {
	n := copy(be.args[:], args)
	return be.q.launch(f, gx, gy, bx, be.args[:n])
}

// blocks1D is the grid of a grid-stride kernel over n elements: one
// thread per element up to 32 blocks per multiprocessor.
func (be *Backend) blocks1D(n int) int {
	return max(1, min(ceilDiv(n, threads), 32*be.dev.SMs))
}

// launch1D queues a grid-stride kernel over n elements.
func (be *Backend) launch1D(f function, n int, args ...uint64) error {
	return be.launch(f, be.blocks1D(n), 1, threads, args...)
}

// done finishes an op: a failed queueing call becomes a device error
// naming op and dims; otherwise the op is recorded.
func (be *Backend) done(op string, err error, dims ...int) error {
	if err != nil {
		return be.deviceErr(op, dimsString(dims), err)
	}
	return be.record(op, dims...)
}

// scratch takes n float32 of device memory for one op's intermediate
// results; give it back with be.release as soon as the op is queued (the
// stream keeps later users behind it).
func (be *Backend) scratch(op string, n int, dims ...int) (*allocation, error) {
	a, err := be.allocate(max(n, 1) * 4)
	if err != nil {
		return nil, be.deviceErr(op, dimsString(dims)+fmt.Sprintf("; scratch of %s", byteSize(int64(n)*4)), err)
	}
	return a, nil
}

func (be *Backend) release(a *allocation) { be.pool.put(a.class, a.ptr) }
