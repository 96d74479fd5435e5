package cpu

// Buffer is a kernels.Buffer in host memory. Buffers come from Backend.Alloc
// and Backend.View; the zero value is not usable.
type Buffer struct {
	data  []float32
	owner *Backend
}

// Len is the number of float32 elements.
func (b *Buffer) Len() int { return len(b.data) }

// Data returns the buffer's memory itself, not a copy: writes through it are
// seen by every op and view that shares it. It is for CPU-only code that must
// avoid a Download; code written against kernels.Backend should not need it.
func (b *Buffer) Data() []float32 { return b.data }
