package mpi

/*
#include "shim.h"
*/
import "C"

import (
	"os"
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
