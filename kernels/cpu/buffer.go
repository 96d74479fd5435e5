package cpu

import "github.com/dml-project/dml/kernels"

var _ kernels.HostBuffer = (*Buffer)(nil)

// Buffer is a kernels.Buffer in host memory. Buffers come from Backend.Alloc
// and Backend.View; the zero value is not usable.
type Buffer struct {
	data  []float32
	owner *Backend
	// mem is the allocation the buffer is, or is a view of: Free marks it
	// freed, so a later use of the buffer or of any view of it panics.
	mem *allocation
	// view is true for buffers from View, which Free refuses.
	view bool
}

// allocation is what Alloc handed out, shared by the buffer and its views.
type allocation struct{ freed bool }

// Len is the number of float32 elements.
func (b *Buffer) Len() int { return len(b.data) }

// Data returns the buffer's memory itself, not a copy, in plain layout
// (a library's layout is reordered back first, layout.go): writes through
// it are seen by every op and view that shares it. It is for code that
// must avoid a Download (kernels.HostBuffer); code written against
// kernels.Backend should not need it.
func (b *Buffer) Data() []float32 {
	b.owner.plain(b.data)
	return b.data
}
