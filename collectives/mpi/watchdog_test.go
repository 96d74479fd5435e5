package mpi

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives/stall"
	"github.com/dml-project/dml/collectives/watch"
)

// TestNativeAllreduceWatchdog: a rank that joins MPI_Allreduce late gets
// the others' stall reports and, past Stall.Abort, their watchdogs end
// them (here: a stand-in for os.Exit records the call).
func TestNativeAllreduceWatchdog(t *testing.T) {
	w := world
	if w == nil || w.Size() < 2 {
		t.Skip("needs 2 ranks")
	}
	// The liveness ring tells each rank what its predecessor is doing: with
	// more than 2 ranks, the rank after the late one names it.
	if err := w.StartWatch(func(watch.Death) {}, func(watch.Death) {}); err != nil {
		t.Fatal(err)
	}
	c := *w
	c.Timeout = 30 * time.Second
	c.Stall = stall.Policy{Warn: 300 * time.Millisecond, Abort: 1200 * time.Millisecond}
	var mu sync.Mutex
	var warnings []string
	c.Warn = func(m string) { mu.Lock(); warnings = append(warnings, m); mu.Unlock() }
	exited := make(chan int, 1)
	c.native = &watchdog{exit: func(code int) { exited <- code }}
	buf := []float32{float32(c.Rank() + 1)}
	if c.Rank() == 1 {
		time.Sleep(3 * time.Second)
	}
	c.EnterOp("late allreduce")
	if err := c.NativeAllreduceSum(buf); err != nil {
		t.Fatal(err)
	}
	n := c.Size()
	if want := float32(n * (n + 1) / 2); buf[0] != want {
		t.Errorf("sum %v, want %v", buf[0], want)
	}
	if c.Rank() == 1 {
		return
	}
	select {
	case code := <-exited:
		if code != 1 {
			t.Errorf("watchdog exit code %d, want 1", code)
		}
	default:
		t.Errorf("rank %d waited 3s past --stall-timeout 1.2s without the watchdog ending it", c.Rank())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warnings) == 0 {
		t.Errorf("no stall warning in 3s at one per 300ms")
	}
	named := false
	for _, m := range warnings {
		if !strings.Contains(m, "MPI_Allreduce") || !strings.Contains(m, "late allreduce #") {
			t.Errorf("warning %q: want the op and MPI_Allreduce", m)
		}
		named = named || strings.Contains(m, "rank 1 has not joined: it was in ")
	}
	if c.Size() > 2 && c.Rank() == 2 && !named {
		t.Errorf("rank 2, the late rank 1's successor, never named it: %q", warnings)
	}
}
