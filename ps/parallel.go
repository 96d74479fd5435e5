package ps

import (
	"runtime"
	"sync"
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
	for lo := chunk; lo < n; lo += chunk {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			f(lo, hi)
		}(lo, min(lo+chunk, n))
	}
	f(0, min(chunk, n))
	wg.Wait()
}
