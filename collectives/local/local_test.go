package local_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/collectivestest"
	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/internal/crash"
)

func init() { local.AbortExits = false }

func TestConformance(t *testing.T) {
	for n := 1; n <= 8; n++ {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			t.Parallel()
			w := local.NewWorld(n)
			w.SetTimeout(30 * time.Second)
			errs := w.Run(func(c *local.Comm) error {
				return collectivestest.Run(c, []collectives.Algorithm{collectives.Ring, collectives.Tree, collectives.Auto})
			})
			for _, err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
}

func TestNativeUnavailable(t *testing.T) {
	w := local.NewWorld(2)
	errs := w.Run(func(c *local.Comm) error {
		return collectives.Allreduce(c, make([]float32, 4), collectives.Sum, collectives.Native)
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "no native AllReduce") {
			t.Errorf("rank %d: got %v, want a 'no native AllReduce' error", r, err)
		}
	}
}

// TestTreeLengthMismatch: recursive doubling detects a mismatch at the
// partners that exchange with the odd rank out; the others time out (or, in
// a real job, are aborted) rather than hang.
func TestTreeLengthMismatch(t *testing.T) {
	w := local.NewWorld(4)
	w.SetTimeout(500 * time.Millisecond)
	errs := w.Run(func(c *local.Comm) error {
		l := 10
		if c.Rank() == 2 {
			l = 11
		}
		return collectives.Allreduce(c, make([]float32, l), collectives.Sum, collectives.Tree)
	})
	mismatch := 0
	for r, err := range errs {
		switch {
		case errors.Is(err, collectives.ErrLengthMismatch):
			mismatch++
		case errors.Is(err, collectives.ErrTimeout):
		default:
			t.Errorf("rank %d: got %v, want a length mismatch or a timeout", r, err)
		}
	}
	if mismatch == 0 {
		t.Errorf("no rank reported the length mismatch: %v", errs)
	}
}

func TestRecvTimeoutNamesPeer(t *testing.T) {
	w := local.NewWorld(2)
	w.SetTimeout(100 * time.Millisecond)
	err := collectives.Recv(w.Comm(0), make([]float32, 3), 1, 7)
	if !errors.Is(err, collectives.ErrTimeout) || !strings.Contains(err.Error(), "from rank 1") {
		t.Fatalf("got %v, want a timeout naming rank 1", err)
	}
}

func TestAbortWakesWaiters(t *testing.T) {
	w := local.NewWorld(3)
	errs := w.Run(func(c *local.Comm) error {
		if c.Rank() == 0 {
			time.Sleep(20 * time.Millisecond)
			c.Abort(3, errors.New("boom"))
			return nil
		}
		return c.Barrier()
	})
	for r := 1; r < 3; r++ {
		if errs[r] == nil || !strings.Contains(errs[r].Error(), "boom") {
			t.Errorf("rank %d: got %v, want the abort reason", r, errs[r])
		}
	}
}

func TestBadPeer(t *testing.T) {
	w := local.NewWorld(2)
	if _, err := w.Comm(0).Isend(nil, 2, 0); !errors.Is(err, collectives.ErrBadRank) {
		t.Fatalf("got %v, want ErrBadRank", err)
	}
}

// TestAutoLengthMismatch: lengths on either side of Auto's threshold must be
// reported as a mismatch on every rank, not leave the ranks in different
// algorithms until the timeout.
func TestAutoLengthMismatch(t *testing.T) {
	w := local.NewWorld(2)
	w.SetTimeout(5 * time.Second)
	errs := w.Run(func(c *local.Comm) error {
		l := 20000
		if c.Rank() == 1 {
			l = 10
		}
		return collectives.Allreduce(c, make([]float32, l), collectives.Sum, collectives.Auto)
	})
	for r, err := range errs {
		if !errors.Is(err, collectives.ErrLengthMismatch) {
			t.Errorf("rank %d: got %v, want ErrLengthMismatch", r, err)
		}
	}
}

// TestRunPanic: a rank that panics fails the others' waits at once, and
// the panic reaches Run's caller with the rank's stack.
func TestRunPanic(t *testing.T) {
	w := local.NewWorld(3)
	start := time.Now()
	defer func() {
		p, ok := recover().(*crash.Panic)
		if !ok || p.Value != "rank 1 hook panics" || !strings.Contains(string(p.Stack), "TestRunPanic") {
			t.Fatalf("recovered %v, want rank 1's panic with its stack", p)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("Run returned after %v: the other ranks waited for their timeout", d)
		}
	}()
	w.Run(func(c *local.Comm) error {
		if c.Rank() == 1 {
			panic("rank 1 hook panics")
		}
		return c.Barrier()
	})
	t.Fatal("no panic reached Run's caller")
}
