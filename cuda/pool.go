//go:build cuda

package cuda

import "math/bits"

// pool keeps freed device allocations in free lists by size class, so that
// a training step, which frees and allocates the same sizes every time,
// never calls cuMemAlloc after the first step. Size classes are multiples
// of 256 bytes up to 1 KiB, then four per power of two (1.25, 1.5, 1.75
// and 2 × 2^k): at most a quarter of an allocation is slack.
//
// Reusing memory as soon as Free returns is safe although the device may
// still be running ops that read or write it: a backend has one stream,
// so every op queued on the reused memory runs after them.
type pool struct {
	free map[int][]devPtr // class bytes → cached allocations
	// cached and live count the bytes in the free lists and handed out.
	cached, live int64
}

// devPtr is a device address (CUdeviceptr).
type devPtr = uint64

// sizeClass returns the bytes an allocation of n bytes gets.
func sizeClass(n int) int {
	if n <= 1024 {
		return (n + 255) &^ 255
	}
	// k: the power of two at or above n; step: an eighth of it, i.e. a
	// quarter of the octave (2^(k-1), 2^k].
	k := bits.Len(uint(n - 1))
	step := 1 << (k - 3)
	return (n + step - 1) &^ (step - 1)
}

// get returns a cached allocation of class bytes, if any.
func (p *pool) get(class int) (devPtr, bool) {
	l := p.free[class]
	if len(l) == 0 {
		return 0, false
	}
	ptr := l[len(l)-1]
	p.free[class] = l[:len(l)-1]
	p.cached -= int64(class)
	p.live += int64(class)
	return ptr, true
}

// put returns an allocation of class bytes to its free list.
func (p *pool) put(class int, ptr devPtr) {
	if p.free == nil {
		p.free = map[int][]devPtr{}
	}
	p.free[class] = append(p.free[class], ptr)
	p.cached += int64(class)
	p.live -= int64(class)
}

// drain empties the free lists, handing each allocation to release.
func (p *pool) drain(release func(devPtr)) {
	for class, l := range p.free {
		for _, ptr := range l {
			release(ptr)
		}
		delete(p.free, class)
	}
	p.cached = 0
}
