package mpi_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/stall"
)

// TestScheduleMismatchNamed: rank 1 runs one collective more than rank 0
// (a broadcast it roots), so the next AllReduce is collective #k on rank 0
// and #k+1 on rank 1. The collectives' tags carry their number: neither
// rank reads the other's floats as its own (rank 0's buffer is untouched,
// where it used to take the broadcast's), both stall, and each report says
// what the peer sent instead.
func TestScheduleMismatchNamed(t *testing.T) {
	if comm.Size() != 2 {
		t.Skip("needs exactly 2 ranks")
	}
	defer bound(t, 30*time.Second)()
	c := *comm
	c.Timeout = 20 * time.Second
	c.Stall = stall.Policy{Warn: 200 * time.Millisecond, Abort: time.Second}
	var mu sync.Mutex
	var warnings []string
	c.Warn = func(m string) { mu.Lock(); warnings = append(warnings, m); mu.Unlock() }
	if c.Rank() == 1 {
		if err := collectives.Broadcast(&c, []float32{7, 7}, 1); err != nil {
			fail(t, err)
		}
	}
	buf := []float32{1, 2}
	err := collectives.Allreduce(&c, buf, collectives.Sum, collectives.Tree)
	if !errors.Is(err, collectives.ErrTimeout) {
		fail(t, fmt.Errorf("AllReduce with schedules one apart: %v, want ErrTimeout", err))
	}
	if c.Rank() == 0 && (buf[0] == 7 || buf[0] == 8) {
		fail(t, fmt.Errorf("rank 0 read the broadcast's floats into its AllReduce: %v", buf))
	}
	mu.Lock()
	report := strings.Join(append(warnings, err.Error()), "\n")
	mu.Unlock()
	want := "rank 1 has sent broadcast of collective #"
	if c.Rank() == 1 {
		want = "rank 0 has sent recursive doubling of collective #"
	}
	for _, part := range []string{want, "while this rank waits for recursive doubling of collective #", "the ranks' schedules differ"} {
		if !strings.Contains(report, part) {
			fail(t, fmt.Errorf("rank %d's reports lack %q:\n%s", c.Rank(), part, report))
		}
	}
	// The numbers: rank 0 waits in #k for the broadcast's #k; rank 1 in
	// #k+1 for the AllReduce's #k.
	var k0, k1 uint64
	if i := strings.Index(report, want); i >= 0 {
		fmt.Sscanf(report[i+len(want):], "%d", &k0)
	}
	const w = "while this rank waits for recursive doubling of collective #"
	if i := strings.Index(report, w); i >= 0 {
		fmt.Sscanf(report[i+len(w):], "%d", &k1)
	}
	if d := int64(k1) - int64(k0); (c.Rank() == 0 && d != 0) || (c.Rank() == 1 && d != 1) {
		fail(t, fmt.Errorf("rank %d: peer's collective #%d, this rank's #%d; want %s", c.Rank(), k0, k1,
			map[int]string{0: "the same", 1: "one more here"}[c.Rank()]))
	}
	// Take the messages left unmatched, so that later tests start clean.
	// (Rank 0 has rank 1's broadcast and AllReduce messages, rank 1 rank
	// 0's AllReduce message.)
	comm.Barrier()
	for range 3 {
		if _, _, _, err := comm.RecvBytesWithin(1-c.Rank(), collectives.AnyTag, 500*time.Millisecond); err != nil {
			break
		}
	}
	comm.Barrier()
}

// TestTagsCarryTheSequence: the tag layout stays in the collectives'
// range and reads back.
func TestTagsCarryTheSequence(t *testing.T) {
	if collectives.TagCollectivesMin+16*collectives.TagSeqMod > collectives.TagCollectivesMax {
		t.Fatalf("tags run past TagCollectivesMax")
	}
	for _, tc := range []struct{ seq, mod, want uint64 }{{11, 12, 12}, {12, 11, 11}, {64, 63, 63}, {63, 0, 64}, {3, 60, 60}, {100, 36, 100}} {
		if got := collectives.NearestSeq(tc.seq, tc.mod); got != tc.want {
			t.Errorf("NearestSeq(%d, %d) = %d, want %d", tc.seq, tc.mod, got, tc.want)
		}
	}
}
