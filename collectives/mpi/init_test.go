package mpi

import (
	"strings"
	"testing"
	"time"
)

// TestInitWatchdog: the start-up watchdog gives up (with its line) only
// when MPI_Init has not returned within the limit, and its line names the
// rank from the launcher's environment and the limit.
func TestInitWatchdog(t *testing.T) {
	gave := make(chan string, 1)
	give := func(msg string) { gave <- msg }

	done := make(chan struct{})
	close(done) // MPI_Init returned in time
	initWatchdog(time.Hour, done, give)
	select {
	case msg := <-gave:
		t.Fatalf("gave up although start-up completed: %q", msg)
	default:
	}

	// Never done: it gives up once the limit has passed (the test waits
	// for the event; the minute is a hang guard).
	go initWatchdog(time.Millisecond, make(chan struct{}), give)
	select {
	case msg := <-gave:
		if !strings.Contains(msg, "MPI start-up did not complete within 1ms (--timeout)") {
			t.Errorf("line %q", msg)
		}
	case <-time.After(time.Minute):
		t.Fatal("the watchdog never gave up")
	}

	env := map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8"}
	if msg := initStalled(10*time.Second, func(k string) string { return env[k] }); !strings.HasPrefix(msg, "dml: rank 3 of 8: MPI start-up did not complete within 10s") {
		t.Errorf("under OpenMPI: %q", msg)
	}
	if msg := initStalled(time.Second, func(string) string { return "" }); !strings.HasPrefix(msg, "dml: this rank: ") {
		t.Errorf("without a launcher: %q", msg)
	}
}
