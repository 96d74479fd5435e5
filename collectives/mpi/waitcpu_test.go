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
// to another rank). Rank 1 sleeps, then sends; rank 0 waits for it, with
// Recv (dml_wait), RecvBytes (dml_probe), then SendBytes of 1 MiB to rank 1
// that receives late and a Barrier it enters late (both MPI_Send and
// MPI_Barrier before: 9-37% here, spinning in OpenMPI), and its whole
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
	// The late side of each kind, and the waiting side (rank 0).
	late := map[string]func() error{
		"recv":       func() error { return collectives.Send(comm, []float32{42}, 0, 777) },
		"recv bytes": func() error { return comm.SendBytes([]byte("late"), 0, 778) },
		"send bytes": func() error { _, _, _, err := comm.RecvBytes(0, 779); return err },
		"barrier":    func() error { return nil }, // the barrier below
		"native allreduce": func() error {
			return comm.NativeAllreduceSum(make([]float32, 1))
		},
	}
	for _, kind := range []string{"recv", "recv bytes", "send bytes", "barrier", "native allreduce"} {
		switch comm.Rank() {
		case 1:
			time.Sleep(delay)
			if err := late[kind](); err != nil {
				fail(t, err)
			}
		case 0:
			buf := make([]float32, 1)
			c0, t0 := cpuTime(t), time.Now()
			var err error
			switch kind {
			case "recv":
				err = collectives.Recv(comm, buf, 1, 777)
			case "recv bytes":
				var msg []byte
				msg, _, _, err = comm.RecvBytes(1, 778)
				if err == nil && string(msg) != "late" {
					err = fmt.Errorf("got %q, want \"late\"", msg)
				}
			case "send bytes": // past the eager limit: the send waits for the receiver
				err = comm.SendBytes(make([]byte, 1<<20), 1, 779)
			case "barrier":
				err = comm.Barrier()
			case "native allreduce":
				buf[0] = 42
				err = comm.NativeAllreduceSum(buf)
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
			// A quarter: a loaded machine may let the peer leave the last
			// barrier, and start its delay, well before this rank.
			if wall < delay/4 {
				fail(t, fmt.Errorf("%s: returned after %v, before the peer came (%v)", kind, wall, delay))
			}
			// MPI_Allreduce is blocking and OpenMPI polls inside it: it
			// spins (see watchdog.go for why it stays blocking); logged,
			// not held to the bound.
			if cpu > wall*3/10 && kind != "native allreduce" {
				fail(t, fmt.Errorf("%s: waiting %v cost %v of CPU time, want under 30%%", kind, wall, cpu))
			}
		default:
			if kind == "native allreduce" {
				if err := late[kind](); err != nil {
					fail(t, err)
				}
			}
		}
		if kind != "barrier" || comm.Rank() != 0 {
			comm.Barrier()
		}
		comm.Barrier()
	}
}
