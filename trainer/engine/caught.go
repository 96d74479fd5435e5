package engine

import (
	"fmt"
	"runtime/debug"

	"github.com/dml-project/dml/kernels"
)

// Caught runs f, turning a panic into an error that carries the stack: the
// communication goroutines (the overlapped AllReduce, dpsgd's exchange,
// adpsgd's averaging and passive server) hand their outcome to the step's
// goroutine, which then fails the step with a message naming the rank,
// instead of the process dying with a Go trace that names nothing.
func Caught(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(kernels.OpFailure); ok { // a library's failure: its one line
				err = f.Err
				return
			}
			err = fmt.Errorf("panic on a communication goroutine: %v\n%s", r, debug.Stack())
		}
	}()
	return f()
}
