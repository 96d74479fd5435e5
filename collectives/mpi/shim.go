package mpi

// The cgo shim: the few MPI calls gompi v0.2.0 does not offer (non-blocking
// send and receive, waiting with a deadline, probing with wildcards) or
// offers without returning MPI's status (everything in gompi ignores the
// return codes). MPI_COMM_WORLD's error handler is set to MPI_ERRORS_RETURN so
// that every failure comes back here as a code, turned into a Go error.
//
// Why a shim and not MPI_THREAD_MULTIPLE with goroutines around gompi's
// blocking Send/Recv: BenchmarkExchange (exchange_test.go, `make
// bench-exchange`: 2 ranks swap a buffer, 2000 iterations, this 2-core
// machine) measured, per exchange,
//
//	bytes     shim (Isend+Irecv+wait)   2 goroutines, MPI_THREAD_MULTIPLE
//	4 KiB       5.9 µs                   4290 µs
//	64 KiB      6.5 µs                   4239 µs
//	1 MiB        69 µs                   3007 µs
//	16 MiB     1193 µs                   3958 µs
//
// Under MPI_THREAD_MULTIPLE every call takes OpenMPI's locks, and two
// threads blocked in MPI_Send/MPI_Recv on one core mostly wait for each
// other to be scheduled; the shim makes one thread drive both transfers.
// The shim also lets a wait give up after a deadline, which a blocking
// MPI_Recv cannot, and returns MPI's error codes (gompi ignores them).

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
