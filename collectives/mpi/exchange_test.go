package mpi_test

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"unsafe"

	gompi "github.com/sbromberger/gompi"

	"github.com/dml-project/dml/collectives"
)

// BenchmarkExchange compares the two ways of swapping a buffer with a peer
// that gompi v0.2.0 leaves open (the measurement behind shim.go's choice):
//
//	shim:    Irecv + Isend + wait through our cgo shim (MPI_THREAD_SERIALIZED)
//	threads: two goroutines in gompi's blocking MPI_Send / MPI_Recv at once
//	         (needs MPI_THREAD_MULTIPLE: run with DML_MPI_THREADS=multiple)
//
// Run it with `make bench-exchange` (2 ranks, a fixed -benchtime count so
// that both ranks run the same number of iterations).
func BenchmarkExchange(b *testing.B) {
	if comm.Size() != 2 {
		b.Skip("needs exactly 2 ranks")
	}
	threads := os.Getenv("DML_MPI_THREADS") == "multiple"
	peer := 1 - comm.Rank()
	for _, size := range []int{4 << 10, 64 << 10, 1 << 20, 16 << 20} {
		send := make([]float32, size/4)
		recv := make([]float32, size/4)
		if !threads {
			b.Run(fmt.Sprintf("mode=shim/bytes=%d", size), func(b *testing.B) {
				b.SetBytes(int64(size))
				for i := 0; i < b.N; i++ {
					if err := collectives.SendRecv(comm, send, peer, recv, peer, 5); err != nil {
						b.Fatal(err)
					}
				}
			})
			continue
		}
		w := gompi.NewCommunicator(nil)
		sb := unsafe.Slice((*byte)(unsafe.Pointer(&send[0])), size)
		rb := unsafe.Slice((*byte)(unsafe.Pointer(&recv[0])), size)
		b.Run(fmt.Sprintf("mode=threads/bytes=%d", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				wg.Add(1)
				go func() { defer wg.Done(); w.SendBytes(sb, peer, 5) }()
				w.RecvPreallocBytes(rb, peer, 5)
				wg.Wait()
			}
		})
	}
}
