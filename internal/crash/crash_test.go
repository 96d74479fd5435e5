package crash

import (
	"strings"
	"sync"
	"testing"
)

func panicsHere() { panic("hook panics") }

// TestRecoverHandler: a panic on a goroutine nobody waits for reaches the
// handler with the value and that goroutine's stack.
func TestRecoverHandler(t *testing.T) {
	got := make(chan *Panic, 1)
	SetHandler(func(p *Panic) { got <- p })
	defer SetHandler(nil)
	Go(panicsHere)
	p := <-got
	if p.Value != "hook panics" || !strings.Contains(string(p.Stack), "panicsHere") {
		t.Fatalf("got %v, want the value and a stack through panicsHere", p)
	}
}

// TestCaptureRepanic: a panic on a goroutine the caller waits for is raised
// again on the caller, carrying the goroutine's stack.
func TestCaptureRepanic(t *testing.T) {
	defer func() {
		r := recover()
		p, ok := r.(*Panic)
		if !ok || p.Value != "hook panics" || !strings.Contains(p.Error(), "panicsHere") {
			t.Fatalf("recovered %v, want a *Panic with the goroutine's stack", r)
		}
	}()
	ps := make([]*Panic, 3)
	var wg sync.WaitGroup
	for i := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer Capture(&ps[i])
			if i == 2 {
				panicsHere()
			}
		}()
	}
	wg.Wait()
	Repanic(First(ps))
	t.Fatal("no panic")
}
