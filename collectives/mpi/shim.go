package mpi

// The cgo shim: the few MPI calls gompi v0.2.0 does not offer (non-blocking
// send and receive, waiting with a deadline, probing with wildcards) or
// offers without returning MPI's status (everything in gompi ignores the
// return codes). MPI_COMM_WORLD's error handler is set to MPI_ERRORS_RETURN so
// that every failure comes back here as a code, turned into a Go error.
//
// Why a shim and not MPI_THREAD_MULTIPLE with goroutines around gompi's
// blocking Send/Recv: measured with BenchmarkExchange (exchange_test.go,
// `make bench-exchange`, 2 ranks, this 2-core machine), the shim's
// Isend+Irecv+wait moves a 4 KiB exchange in a fraction of the time of two
// goroutines blocked in MPI_Send/MPI_Recv under THREAD_MULTIPLE (each
// blocking cgo call ties up an OS thread, and OpenMPI's THREAD_MULTIPLE path
// takes locks on every call), and it matches it for 16 MiB. The figures are
// in the README. The shim also lets a wait give up after a deadline, which a
// blocking MPI_Recv cannot.

/*
#cgo pkg-config: ompi-c
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

const dmlTimeout = C.DML_TIMEOUT

// mpiError turns an MPI return code into an error with MPI's own words.
func mpiError(rc C.int) error {
	if rc == C.MPI_SUCCESS {
		return nil
	}
	buf := make([]byte, C.MPI_MAX_ERROR_STRING)
	var n C.int
	C.dml_error_string(rc, (*C.char)(unsafe.Pointer(&buf[0])), &n)
	return fmt.Errorf("MPI error %d: %s", int(rc), string(buf[:n]))
}

// ptr returns the address of a slice's first element, or nil when empty.
func ptr[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}
