package mpi

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// board is the shared memory of a job's ranks on one node: a small file
// in /dev/shm named after the job (PMIX_NAMESPACE), mapped shared by every
// local rank and unlinked once all have mapped it (Init), so that nothing
// is left behind however the job ends. It holds each rank's doorbell, on
// which its waits sleep (shim.c, "Doorbells"; bells.go). (It also held what
// each rank was doing, so that the survivors on its node could name a
// rank killed outright; the liveness ring (ring.go, collectives/watch)
// does that now, on any node.)
type board struct {
	all  []byte // the mapping: the doorbells
	path string
}

// openBoard maps this job's board, or returns nil outside an MPI launcher
// or where /dev/shm cannot hold it (the waits then sleep without bells).
func openBoard(rank, size int) *board {
	job := os.Getenv("PMIX_NAMESPACE")
	if job == "" {
		job = os.Getenv("OMPI_MCA_ess_base_jobid")
	}
	if job == "" || size < 2 || strings.ContainsAny(job, "/\x00") {
		return nil
	}
	path := filepath.Join("/dev/shm", "dml-job-"+job)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil
	}
	defer f.Close()
	n := size * bellBytes
	if err := f.Truncate(int64(n)); err != nil {
		return nil
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil
	}
	setBells(mem, rank, size)
	return &board{all: mem, path: path}
}

// unlink removes the board's file once every local rank has mapped it
// (Init, after a barrier): the mappings stay shared, and nothing is left
// behind however the job ends.
func (b *board) unlink() {
	if b != nil {
		os.Remove(b.path)
	}
}

// close unmaps the board.
func (b *board) close() {
	if b == nil {
		return
	}
	clearBells()
	if bellsOn() {
		// A wait on another thread may still hold a doorbell's address
		// (a rank that exits without Finalize): the mapping stays until
		// the process ends.
		return
	}
	syscall.Munmap(b.all)
}
