package stall

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCheck walks a wait through the policy on a fake clock: the checks
// come when Check says, warnings every Warn, the abort at Abort.
func TestCheck(t *testing.T) {
	s := time.Second
	cases := []struct {
		name  string
		p     Policy
		first time.Duration
		// the actions at each check, in order, and the elapsed time of each
		want []Action
		at   []time.Duration
	}{
		{"off", Policy{}, 0, nil, nil},
		{"warn only", Policy{Warn: 60 * s}, 60 * s, []Action{Warn, Warn, Warn}, []time.Duration{60 * s, 120 * s, 180 * s}},
		{"warn then abort", Policy{Warn: 60 * s, Abort: 150 * s}, 60 * s, []Action{Warn, Warn, Abort}, []time.Duration{60 * s, 120 * s, 150 * s}},
		{"abort before warn", Policy{Warn: 60 * s, Abort: 30 * s}, 30 * s, []Action{Abort}, []time.Duration{30 * s}},
		{"abort only", Policy{Abort: 10 * s}, 10 * s, []Action{Abort}, []time.Duration{10 * s}},
		{"abort at a warning", Policy{Warn: 5 * s, Abort: 10 * s}, 5 * s, []Action{Warn, Abort}, []time.Duration{5 * s, 10 * s}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.p.FirstCheck(); got != c.first {
				t.Fatalf("FirstCheck = %v, want %v", got, c.first)
			}
			if c.first == 0 {
				return
			}
			elapsed, warned := c.first, 0
			for i := range c.want {
				if elapsed != c.at[i] {
					t.Fatalf("check %d at %v, want %v", i, elapsed, c.at[i])
				}
				act, next := c.p.Check(elapsed, warned)
				if act != c.want[i] {
					t.Fatalf("check %d at %v: %v, want %v", i, elapsed, act, c.want[i])
				}
				if act == Abort {
					if i != len(c.want)-1 {
						t.Fatalf("aborted at check %d of %d", i, len(c.want))
					}
					return
				}
				if act == Warn {
					warned++
				}
				if next <= 0 {
					t.Fatalf("check %d at %v: no next check", i, elapsed)
				}
				elapsed += next
			}
		})
	}
}

// TestCheckLate: a wait loop that comes back late (a slow poll) still gets
// one warning per interval passed, never a burst, and is aborted once past
// Abort.
func TestCheckLate(t *testing.T) {
	p := Policy{Warn: 10 * time.Second, Abort: time.Minute}
	act, next := p.Check(15*time.Second, 0)
	if act != Warn || next != 5*time.Second {
		t.Fatalf("Check(15s, 0) = %v, %v; want warn, 5s", act, next)
	}
	act, next = p.Check(17*time.Second, 1)
	if act != Continue || next != 3*time.Second {
		t.Fatalf("Check(17s, 1) = %v, %v; want continue, 3s", act, next)
	}
	if act, _ := p.Check(61*time.Second, 1); act != Abort {
		t.Fatalf("Check(61s) = %v, want abort", act)
	}
}

func TestTrackerAndReport(t *testing.T) {
	tr := NewTracker()
	if op := tr.Current(); op.String() != "set-up (no collective yet)" {
		t.Fatalf("fresh tracker: %q", op)
	}
	tr.EnterOp("broadcast")
	tr.EnterOp("allreduce")
	tr.SetStep(12)
	op := tr.Current()
	if op.String() != "allreduce #2 at step 12" {
		t.Fatalf("op = %q", op)
	}
	r := Report(3, op, "recv from rank 2 tag 1048577", 2, 61500*time.Millisecond)
	for _, want := range []string{"rank 3", "1m1.5s", "allreduce #2 at step 12", "waiting on rank 2", "recv from rank 2"} {
		if !strings.Contains(r, want) {
			t.Errorf("report %q lacks %q", r, want)
		}
	}
	if r := Report(0, op, "barrier", -1, time.Second); !strings.Contains(r, "some rank has not joined") {
		t.Errorf("group report %q", r)
	}
}

// TestTrackerConcurrent: marks from two goroutines (the trainer's loop and
// its communication goroutine) are safe (run with -race).
func TestTrackerConcurrent(t *testing.T) {
	tr := NewTracker()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range 1000 {
			tr.SetStep(i)
		}
	}()
	go func() {
		defer wg.Done()
		for range 1000 {
			tr.EnterOp("allreduce")
			_ = tr.Current()
		}
	}()
	wg.Wait()
	if op := tr.Current(); op.Seq != 1000 || op.Step != 999 {
		t.Fatalf("after the marks: %+v", op)
	}
}
