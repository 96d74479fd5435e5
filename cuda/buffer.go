//go:build cuda

package cuda

import (
	"fmt"

	"github.com/dml-project/dml/kernels"
)

// allocation is one block of device memory from the pool; every Buffer and
// view cut from it points here, so a use after Free is caught.
type allocation struct {
	ptr   devPtr
	class int // bytes, the pool's size class
	freed bool
}

// Buffer is a kernels.Buffer in device memory: n float32 starting at ptr,
// inside alloc. Buffers come from Backend.Alloc and Backend.View.
type Buffer struct {
	ptr   devPtr
	n     int
	alloc *allocation // nil for an empty buffer from Alloc(0)
	view  bool
	owner *Backend
}

// Len is the number of float32 elements.
func (b *Buffer) Len() int { return b.n }

// DevicePtr is the buffer's device address (for code that launches its own
// kernels on the backend's stream).
func (b *Buffer) DevicePtr() uint64 { return b.ptr }

// buf returns b as this backend's *Buffer. A buffer of another backend, or
// one used after Free, is a programmer error: panic.
func (be *Backend) buf(b kernels.Buffer) *Buffer {
	d, ok := b.(*Buffer)
	if !ok || d == nil {
		panic(fmt.Sprintf("cuda: a %T is not a buffer of this backend", b))
	}
	if d.owner != be {
		panic("cuda: buffer belongs to another cuda.Backend")
	}
	if d.alloc != nil && d.alloc.freed {
		panic("cuda: buffer used after Free")
	}
	return d
}

// Alloc returns a zeroed buffer of n elements from the pool. A device that
// cannot hold it returns an error wrapping kernels.ErrDevice that names the
// size, the device and the rank.
func (be *Backend) Alloc(n int) (kernels.Buffer, error) {
	if err := be.usable("Alloc"); err != nil {
		return nil, err
	}
	if n < 0 || n > maxElems {
		return nil, be.shapeErr("Alloc", "n=%d: bad length", n)
	}
	b := &Buffer{n: n, owner: be}
	if n == 0 {
		return b, nil
	}
	a, err := be.allocate(n * 4)
	if err != nil {
		return nil, be.deviceErr("Alloc", fmt.Sprintf("n=%d (%s)", n, byteSize(int64(n)*4)), err)
	}
	b.ptr, b.alloc = a.ptr, a
	if err := be.q.memset32(a.ptr, 0, n); err != nil {
		return nil, be.deviceErr("Alloc", fmt.Sprintf("n=%d", n), err)
	}
	return b, be.record("Alloc", n)
}

// maxElems bounds a buffer's length so that byte counts never overflow.
const maxElems = 1 << 40

// allocate takes bytes from the pool, or from the device. When the device
// is out of memory it gives the pool's cached blocks back and tries once
// more.
func (be *Backend) allocate(bytes int) (*allocation, error) {
	class := sizeClass(bytes)
	if ptr, ok := be.pool.get(class); ok {
		return &allocation{ptr: ptr, class: class}, nil
	}
	ptr, err := be.q.alloc(class)
	if outOfMemory(err) && be.pool.cached > 0 {
		// Queued ops may still use cached blocks: wait before freeing.
		if err := be.q.sync(); err != nil {
			return nil, err
		}
		be.pool.drain(func(p devPtr) {
			_ = be.q.free(p)
			delete(be.mem, p)
		})
		ptr, err = be.q.alloc(class)
	}
	if err != nil {
		return nil, err
	}
	if be.mem == nil {
		be.mem = map[devPtr]struct{}{}
	}
	be.mem[ptr] = struct{}{}
	be.pool.live += int64(class)
	return &allocation{ptr: ptr, class: class}, nil
}

// Free returns a buffer from Alloc to the pool. Freeing a view, or a buffer
// twice, is a programmer error (panic). Free(nil) does nothing.
func (be *Backend) Free(b kernels.Buffer) error {
	if b == nil {
		return nil
	}
	d := be.buf(b)
	if d.view {
		panic("cuda: Free of a View (free the buffer it was cut from)")
	}
	if d.alloc == nil {
		return nil
	}
	d.alloc.freed = true
	if be.closed {
		return nil
	}
	be.pool.put(d.alloc.class, d.alloc.ptr)
	return nil
}

// View returns the n elements of b starting at off, sharing b's memory.
// Elements outside b are a programmer error (panic).
func (be *Backend) View(b kernels.Buffer, off, n int) kernels.Buffer {
	d := be.buf(b)
	if off < 0 || n < 0 || off > d.n-n {
		panic(fmt.Sprintf("cuda: View(off=%d, n=%d) out of range for a buffer of %d elements", off, n, d.n))
	}
	return &Buffer{ptr: d.ptr + uint64(off)*4, n: n, alloc: d.alloc, view: true, owner: be}
}

// byteSize formats a byte count for messages.
func byteSize(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}
