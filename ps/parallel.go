package ps

import (
	"runtime"
	"sync"

	"github.com/dml-project/dml/internal/crash"
)

// parallelMin is the smallest range a server splits over goroutines: below
// it, starting them costs more than the loop.
const parallelMin = 1 << 17

// parallelFor calls f(lo, hi) on consecutive chunks covering [0, n), on up
// to GOMAXPROCS goroutines, and returns when all are done. The server uses
// it for element-wise work over a range (updates, BSP sums), so the result
// is the same bits whatever the split. Callers make the closure only when
// n >= parallelMin (f escapes: a closure costs an allocation), so that
// smaller messages allocate nothing; large ones spend a few small
// allocations (closure, goroutines) against hundreds of KB of work.
func parallelFor(n int, f func(lo, hi int)) {
	parts := min(runtime.GOMAXPROCS(0), n/(parallelMin/2))
	if parts < 2 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + parts - 1) / parts
	// A panic in a chunk is raised again here, on the caller, with the
	// goroutine's stack (internal/crash): not a crash naming nothing.
	panics := make([]*crash.Panic, parts)
	for i, lo := 1, chunk; lo < n; i, lo = i+1, lo+chunk {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			defer crash.Capture(&panics[i])
			f(lo, hi)
		}(lo, min(lo+chunk, n))
	}
	func() {
		defer wg.Wait() // also when f panics here: no chunk outlives the call
		f(0, min(chunk, n))
	}()
	crash.Repanic(crash.First(panics))
}
