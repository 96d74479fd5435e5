package hugemem

import (
	"sync"
	"syscall"
	"unsafe"
)

const hugePage = 2 << 20

// mapHuge maps n floats of anonymous memory aligned to a huge page and
// marks it MADV_HUGEPAGE; nil if the system refuses either.
func mapHuge(n int) ([]float32, func()) {
	size := (n*4 + hugePage - 1) &^ (hugePage - 1)
	mem, err := syscall.Mmap(-1, 0, size+hugePage, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil
	}
	off := int(-uintptr(unsafe.Pointer(&mem[0])) & (hugePage - 1))
	body := mem[off : off+size]
	if err := syscall.Madvise(body, 14 /* MADV_HUGEPAGE */); err != nil {
		syscall.Munmap(mem)
		return nil, nil
	}
	var once sync.Once
	return floatsAt(unsafe.Pointer(&body[0]), n), func() { once.Do(func() { syscall.Munmap(mem) }) }
}

// Advise marks the whole huge pages inside f's memory MADV_HUGEPAGE, so
// that its first touches fault in 2 MiB at a time instead of 4 KiB (a
// large table filled once, as a data set converted to floats). It changes
// nothing else and ignores a refusal.
func Advise(f []float32) {
	if len(f)*4 < 2*hugePage {
		return
	}
	p := uintptr(unsafe.Pointer(&f[0]))
	lo := (p + hugePage - 1) &^ (hugePage - 1)
	hi := (p + uintptr(len(f))*4) &^ (hugePage - 1)
	if hi <= lo {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&f[0]), lo-p)), hi-lo)
	_ = syscall.Madvise(b, 14 /* MADV_HUGEPAGE */)
}

// floatsAt views n floats at p.
func floatsAt(p unsafe.Pointer, n int) []float32 { return unsafe.Slice((*float32)(p), n) }
