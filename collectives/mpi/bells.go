package mpi

/*
#include "shim.h"
*/
import "C"

import (
	"os"
	"sync/atomic"
	"unsafe"
)

// bellBytes is a doorbell's size in the board: a cache line, so that ranks
// ringing one bell do not contend with another's (shim.c, "Doorbells").
const bellBytes = C.sizeof_dml_bell

// bellsOn says whether waits sleep on doorbells: DML_MPI_BELLS=off turns
// them off (timed sleeps only, the earlier behaviour), for comparison.
func bellsOn() bool { return os.Getenv("DML_MPI_BELLS") != "off" }

// setBells points the C waits at this node's doorbells: mem holds one per
// rank of the world (the ranks of other nodes' are never waited on).
func setBells(mem []byte, rank, size int) {
	if len(mem) < size*bellBytes || !bellsOn() {
		return
	}
	C.dml_me = C.int(rank)
	C.dml_nbells = C.int(size)
	C.dml_bells = (*C.dml_bell)(unsafe.Pointer(&mem[0])) // shared memory, not Go's heap
}

// clearBells stops the waits from using the doorbells (before the memory
// that holds them is unmapped).
func clearBells() {
	C.dml_bells = nil
	C.dml_nbells = 0
}

// bellSeq reads rank r's doorbell count (for tests); ok is false when the
// waits have no doorbells.
func bellSeq(r int) (seq uint32, ok bool) {
	if C.dml_bells == nil || r < 0 || r >= int(C.dml_nbells) {
		return 0, false
	}
	b := (*C.dml_bell)(unsafe.Add(unsafe.Pointer(C.dml_bells), uintptr(r)*bellBytes))
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&b.seq))), true
}
