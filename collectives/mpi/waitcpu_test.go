package mpi_test

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
)

// cpuTime is this process's user+system CPU time so far (all its threads:
// Go's, MPI's and the waiting one).
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fail(t, fmt.Errorf("getrusage: %v", err))
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestWaitCostsLittleCPU: a rank waiting for a message that comes late must
// not burn its core while it waits (the core belongs to its own compute, or
// to another rank). Rank 1 sleeps, then sends; rank 0 waits for it, once
// with Recv (dml_wait) and once with RecvBytes (dml_probe), and its whole
// process must have used under 30% of the wall time in CPU time. A
// spinning wait uses about 100%. DML_WAIT_CPU_MS sets the delay (default
// 300 ms) for measuring by hand.
func TestWaitCostsLittleCPU(t *testing.T) {
	if comm.Size() < 2 {
		t.Skip("needs 2 ranks: this is the 1-rank pass; the 2- and 4-rank jobs run it")
	}
	delay := 300 * time.Millisecond
	if ms, err := strconv.Atoi(os.Getenv("DML_WAIT_CPU_MS")); err == nil && ms > 0 {
		delay = time.Duration(ms) * time.Millisecond
	}
	comm.Barrier()
	for _, kind := range []string{"recv", "recv bytes"} {
		switch comm.Rank() {
		case 1:
			time.Sleep(delay)
			var err error
			if kind == "recv" {
				err = collectives.Send(comm, []float32{42}, 0, 777)
			} else {
				err = comm.SendBytes([]byte("late"), 0, 778)
			}
			if err != nil {
				fail(t, err)
			}
		case 0:
			buf := make([]float32, 1)
			c0, t0 := cpuTime(t), time.Now()
			var err error
			if kind == "recv" {
				err = collectives.Recv(comm, buf, 1, 777)
			} else {
				var msg []byte
				msg, _, _, err = comm.RecvBytes(1, 778)
				if err == nil && string(msg) != "late" {
					err = fmt.Errorf("got %q, want \"late\"", msg)
				}
			}
			wall, cpu := time.Since(t0), cpuTime(t)-c0
			if err != nil {
				fail(t, fmt.Errorf("%s: %v", kind, err))
			}
			if kind == "recv" && buf[0] != 42 {
				fail(t, fmt.Errorf("recv: got %v, want 42", buf[0]))
			}
			t.Logf("np=%d %s: waited %v, process CPU time %v (%.1f%%)", comm.Size(), kind,
				wall.Round(time.Millisecond), cpu.Round(100*time.Microsecond), 100*cpu.Seconds()/wall.Seconds())
			if wall < delay/2 {
				fail(t, fmt.Errorf("%s: returned after %v, before the message was sent (%v)", kind, wall, delay))
			}
			if cpu > wall*3/10 {
				fail(t, fmt.Errorf("%s: waiting %v cost %v of CPU time, want under 30%%", kind, wall, cpu))
			}
		}
		comm.Barrier()
	}
}
