package ps

import (
	"runtime"
	"strings"
	"testing"

	"github.com/dml-project/dml/internal/crash"
)

func chunkPanics(lo int) {
	if lo > 0 {
		panic("hook: a server chunk panics")
	}
}

// TestParallelForPanic: a panic in a chunk run on another goroutine is
// raised again on the caller, with that goroutine's stack, so that the
// rank's panic handler (cmd/dml: a line naming the rank, then MPI_Abort)
// sees it, instead of the process dying with a trace that names nothing.
func TestParallelForPanic(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	defer func() {
		p, ok := recover().(*crash.Panic)
		if !ok || p.Value != "hook: a server chunk panics" || !strings.Contains(string(p.Stack), "chunkPanics") {
			t.Fatalf("recovered %v, want the chunk's panic with its stack", p)
		}
	}()
	parallelFor(4*parallelMin, func(lo, hi int) { chunkPanics(lo) })
	t.Fatal("no panic reached the caller")
}
