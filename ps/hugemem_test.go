package ps

import (
	"runtime"
	"testing"
)

// TestStatsKeepsTablesAlive: a server's weights on huge pages
// (internal/hugemem) are unmapped when the server becomes unreachable,
// which can happen while Stats copies them (the server's last use at the
// end of RunServer): Stats must keep it alive to the end of the copy.
// With a collector running all the time, 120 servers of 4 MB each found
// that fault within a few servers before the fix.
func TestStatsKeepsTablesAlive(t *testing.T) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	defer func() { close(stop); <-done }()
	const p = 1 << 20
	initial := make([]float32, p)
	for i := range initial {
		initial[i] = float32(i)
	}
	for range 120 {
		s, err := NewServer(Config{Servers: 1}, 0, 2, initial)
		if err != nil {
			t.Fatal(err)
		}
		if w := s.Stats(0).Weights; len(w) != p || w[p-1] != p-1 {
			t.Fatalf("Stats gave %d weights, the last %v", len(w), w[len(w)-1])
		}
	}
}
