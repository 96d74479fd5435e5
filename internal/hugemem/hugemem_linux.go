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
