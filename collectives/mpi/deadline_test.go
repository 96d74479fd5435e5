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

// bound fails the whole job if a test has not finished in d: a send or
// wait without a deadline would otherwise hang the test binary (and CI)
// instead of failing it.
func bound(t *testing.T, d time.Duration) func() {
	tm := time.AfterFunc(d, func() {
		comm.Abort(1, fmt.Errorf("%s: still running after %v: a wait without a deadline", t.Name(), d))
	})
	return func() { tm.Stop() }
}

// TestSendBytesDeadline: a byte message past the eager limit to a rank that
// never receives it (a stopped server, as in issue 10) fails with
// ErrTimeout naming that rank, instead of blocking in MPI_Send for ever.
func TestSendBytesDeadline(t *testing.T) {
	if comm.Size() < 2 {
		t.Skip("needs 2 ranks")
	}
	defer bound(t, 30*time.Second)()
	const tag = 23456
	c := *comm
	c.Timeout = 300 * time.Millisecond
	if c.Rank() == 0 {
		start := time.Now()
		err := c.SendBytes(make([]byte, 1<<20), 1, tag)
		if !errors.Is(err, collectives.ErrTimeout) || !strings.Contains(err.Error(), "to rank 1") {
			fail(t, fmt.Errorf("SendBytes to a rank that does not receive: %v, want ErrTimeout naming rank 1", err))
		}
		if d := time.Since(start); d < c.Timeout {
			fail(t, fmt.Errorf("SendBytes gave up after %v, before its deadline %v", d, c.Timeout))
		}
	}
	comm.Barrier()
	if c.Rank() == 1 {
		// If MPI could not cancel the send, take it now.
		c.RecvBytesWithin(0, tag, 300*time.Millisecond)
	}
	comm.Barrier()
}

// TestStallReport: a rank that waits on a peer that never joins prints the
// stall report every Stall.Warn — the operation, the step and the peer —
// and fails with it at Stall.Abort.
func TestStallReport(t *testing.T) {
	if comm.Size() < 2 {
		t.Skip("needs 2 ranks")
	}
	defer bound(t, 30*time.Second)()
	const tag = 23457
	c := *comm
	c.Timeout = 20 * time.Second
	c.Stall = stall.Policy{Warn: 200 * time.Millisecond, Abort: time.Second}
	var mu sync.Mutex
	var warnings []string
	c.Warn = func(m string) { mu.Lock(); warnings = append(warnings, m); mu.Unlock() }
	if c.Rank() != 1 {
		c.EnterOp("test exchange")
		c.SetStep(7)
		start := time.Now()
		err := collectives.Recv(&c, make([]float32, 4), 1, tag)
		if !errors.Is(err, collectives.ErrTimeout) {
			fail(t, fmt.Errorf("recv from a rank that never sends: %v, want ErrTimeout", err))
		}
		// The stall inspector ended it (its report is the error), not
		// the transport's 20 s deadline; never before the stall timeout.
		if d := time.Since(start); d < time.Second || !strings.Contains(fmt.Sprint(err), "no progress after --stall-timeout 1s") {
			fail(t, fmt.Errorf("gave up after %v with %v, want the stall inspector's abort at --stall-timeout 1s", d, err))
		}
		mu.Lock()
		got := append([]string(nil), warnings...)
		mu.Unlock()
		if len(got) < 2 || len(got) > 4 {
			fail(t, fmt.Errorf("%d warnings %q in 1s at one per 200ms, want 4 (at least 2 on a slow machine)", len(got), got))
		}
		want := fmt.Sprintf("stall: rank %d has waited", c.Rank())
		for _, m := range append(got, err.Error()) {
			for _, part := range []string{want, "in test exchange #", "at step 7", "waiting on rank 1", "recv from rank 1 tag 23457"} {
				if !strings.Contains(m, part) {
					fail(t, fmt.Errorf("report %q lacks %q", m, part))
				}
			}
		}
	}
	comm.Barrier()
}
