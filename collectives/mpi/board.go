package mpi

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/dml-project/dml/collectives/stall"
)

// board is where the ranks of a job on one node write what they are doing,
// so that the survivors can say who died and when it was last heard of:
// a rank killed outright (SIGKILL, the out-of-memory killer) prints
// nothing, and OpenMPI only names it. It is a small file in /dev/shm named
// after the job (PMIX_NAMESPACE), mapped shared by every local rank and
// unlinked once all have mapped it (Init), with a
// slot per rank of the world: the rank's pid, its operation count, step
// and operation name, written with plain stores at each EnterOp/SetStep
// (a torn read only garbles a diagnostic). Ranks on other nodes write
// their own node's board, so a rank is named only by the survivors on its
// node. After the slots the mapping holds each rank's doorbell, on which
// its waits sleep (shim.c, "Doorbells"; bells.go).
type board struct {
	mu   sync.Mutex
	mem  []byte // the slots
	all  []byte // the mapping: the slots and the doorbells
	rank int
	path string
}

const (
	slotBytes = 128
	nameMax   = slotBytes - 32
)

// openBoard maps this job's board, or returns nil outside an MPI launcher
// or where /dev/shm cannot hold it (the board is a convenience only).
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
	// The slots, then the ranks' doorbells (bells.go).
	n := size * (slotBytes + bellBytes)
	if err := f.Truncate(int64(n)); err != nil {
		return nil
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil
	}
	b := &board{mem: mem[:size*slotBytes], all: mem, rank: rank, path: path}
	binary.LittleEndian.PutUint64(b.slot(rank), uint64(os.Getpid()))
	setBells(mem[size*slotBytes:], rank, size)
	return b
}

func (b *board) slot(r int) []byte { return b.mem[r*slotBytes : (r+1)*slotBytes] }

// set records op as this rank's current operation.
func (b *board) set(op stall.Op) {
	if b == nil {
		return
	}
	b.mu.Lock()
	s := b.slot(b.rank)
	binary.LittleEndian.PutUint64(s[8:], op.Seq)
	binary.LittleEndian.PutUint64(s[16:], uint64(int64(op.Step)))
	name := op.Name
	if len(name) > nameMax-1 {
		name = name[:nameMax-1]
	}
	s[24] = byte(len(name))
	copy(s[32:], name)
	b.mu.Unlock()
}

// Gone is a rank of this node whose process no longer exists, and what it
// was doing when last heard of.
type Gone struct {
	Rank, PID int
	Op        stall.Op
}

func (g Gone) String() string {
	return fmt.Sprintf("rank %d (pid %d) ended without a word (killed or crashed); it was last heard of in %s", g.Rank, g.PID, g.Op)
}

// gone lists the ranks of this node's board whose processes have ended.
func (b *board) gone() []Gone {
	if b == nil {
		return nil
	}
	var out []Gone
	for r := 0; r < len(b.mem)/slotBytes; r++ {
		s := b.slot(r)
		pid := int(binary.LittleEndian.Uint64(s))
		if pid <= 0 || r == b.rank {
			continue
		}
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
			continue // alive (or not ours to ask: then not known dead)
		}
		n := min(int(s[24]), nameMax-1)
		out = append(out, Gone{Rank: r, PID: pid, Op: stall.Op{Name: string(s[32 : 32+n]),
			Seq: binary.LittleEndian.Uint64(s[8:]), Step: int(int64(binary.LittleEndian.Uint64(s[16:])))}})
	}
	return out
}

// firstAlive says whether this rank is the lowest rank of its node's board
// still alive (the one that speaks for the node).
func (b *board) firstAlive() bool {
	for r := 0; r < b.rank; r++ {
		pid := int(binary.LittleEndian.Uint64(b.slot(r)))
		if pid > 0 && syscall.Kill(pid, 0) != syscall.ESRCH {
			return false
		}
	}
	return true
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

// GonePeers lists the ranks of this job on this node that have ended
// without a word (a process killed outright), with what each was doing
// when last heard of; speak says whether this rank is the one that should
// report them (the lowest live rank of the node). Both are empty outside a
// launcher.
func (c *Comm) GonePeers() (gone []Gone, speak bool) {
	if c.board == nil {
		return nil, false
	}
	g := c.board.gone()
	return g, len(g) > 0 && c.board.firstAlive()
}

// CloseBoard unmaps this node's board (a rank about to exit without
// Finalize).
func (c *Comm) CloseBoard() {
	c.board.close()
	c.board = nil
}
