// Package crash routes panics of goroutines to one place. A panic on a
// goroutine other than main's ends a Go program with a trace that names no
// rank, and a deferred recover on the main goroutine cannot catch it. Two
// helpers cover the goroutines dml starts:
//
//   - a goroutine whose caller waits for it (a parallel loop) captures its
//     panic (Capture) and the caller raises it again once the wait is over
//     (Repanic), with the goroutine's stack, so that whatever handles the
//     caller's panics (cmd/dml's abortOnPanic on main) handles it;
//   - a goroutine nobody waits for (a watcher, a signal handler) defers
//     Recover, which hands the panic with its stack to the process's
//     handler (SetHandler: cmd/dml prints a line naming the rank and what
//     it was doing, with the stack, and ends the job), or, without one,
//     panics on as before.
package crash

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"
)

// Panic is a recovered panic and the stack of the goroutine it happened on.
type Panic struct {
	Value any
	Stack []byte
}

// Error makes a Panic printable as an error: the value, then the stack.
func (p *Panic) Error() string { return fmt.Sprintf("%v\n[goroutine stack]\n%s", p.Value, p.Stack) }

// String is Error.
func (p *Panic) String() string { return p.Error() }

var handler atomic.Pointer[func(*Panic)]

// SetHandler sets the handler of panics on goroutines nobody waits for
// (nil: none; they crash the process as Go does). The handler should not
// return (it ends the process); if it does, the goroutine ends.
func SetHandler(h func(*Panic)) {
	if h == nil {
		handler.Store(nil)
		return
	}
	handler.Store(&h)
}

// Recover, deferred at the top of a goroutine nobody waits for, hands a
// panic of that goroutine to the handler set by SetHandler.
func Recover() {
	r := recover()
	if r == nil {
		return
	}
	p, ok := r.(*Panic)
	if !ok {
		p = &Panic{Value: r, Stack: debug.Stack()}
	}
	if h := handler.Load(); h != nil {
		(*h)(p)
		return
	}
	panic(p)
}

// Go runs f on a new goroutine under Recover.
func Go(f func()) {
	go func() {
		defer Recover()
		f()
	}()
}

// Capture, deferred in a goroutine its caller waits for, records a panic
// of that goroutine in *p (the first one, when several goroutines share
// p: guard it, or give each its own) with the goroutine's stack.
func Capture(p **Panic) {
	r := recover()
	if r == nil {
		return
	}
	if q, ok := r.(*Panic); ok {
		*p = q
		return
	}
	*p = &Panic{Value: r, Stack: debug.Stack()}
}

// Repanic panics with p on the calling goroutine, if p is not nil.
func Repanic(p *Panic) {
	if p != nil {
		panic(p)
	}
}

// First returns the first non-nil of ps.
func First(ps []*Panic) *Panic {
	for _, p := range ps {
		if p != nil {
			return p
		}
	}
	return nil
}
