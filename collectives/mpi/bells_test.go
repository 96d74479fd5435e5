package mpi

import (
	"os"
	"testing"
)

// TestDoorbellsRing: in a launched job the waits have doorbells, a send
// rings the destination's (so that a sleeping receiver wakes) and a
// completed receive rings the sender's (whose large send may be waiting
// for it).
func TestDoorbellsRing(t *testing.T) {
	w := world
	if w == nil || w.Size() < 2 {
		t.Skip("needs 2 ranks")
	}
	if os.Getenv("DML_MPI_BELLS") == "off" {
		t.Skip("DML_MPI_BELLS=off")
	}
	if _, ok := bellSeq(w.Rank()); !ok {
		t.Fatal("no doorbells in a launched job")
	}
	const tag = 4242
	before0, _ := bellSeq(0)
	before1, _ := bellSeq(1)
	if err := w.Barrier(); err != nil {
		t.Fatal(err)
	}
	switch w.Rank() {
	case 0:
		if err := w.SendBytes([]byte("ring"), 1, tag); err != nil {
			t.Fatal(err)
		}
	case 1:
		if _, _, _, err := w.RecvBytes(0, tag); err != nil {
			t.Fatal(err)
		}
	}
	// The send rings after MPI_Isend returns (shim.c), so the message can
	// be received before the bell rings (it was, over TCP between the
	// cluster test's hosts): each rank looks at its bell once the other
	// has passed the barrier, that is, after the ring.
	if err := w.Barrier(); err != nil {
		t.Fatal(err)
	}
	if w.Rank() == 1 {
		if after, _ := bellSeq(1); after == before1 {
			t.Errorf("rank 1 received rank 0's message, but its bell did not ring (count %d)", after)
		}
	}
	if w.Rank() == 0 {
		if after, _ := bellSeq(0); after == before0 {
			t.Errorf("rank 1 completed the receive of rank 0's message, but rank 0's bell did not ring (count %d)", after)
		}
	}
}
