package mpi_test

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/collectivestest"
	"github.com/dml-project/dml/collectives/mpi"
)

var comm *mpi.Comm

// TestMain launches the tests under `mpirun -np 2` and `-np 4` when `go test`
// started them directly, then runs them once more in this process as a
// singleton world of one rank.
func TestMain(m *testing.M) {
	if !mpi.Launched() {
		for _, np := range []int{2, 4} {
			fmt.Printf("=== mpirun -np %d %s\n", np, os.Args[0])
			if err := mpi.Relaunch(np); err != nil {
				fmt.Fprintf(os.Stderr, "FAIL: tests under mpirun -np %d: %v\n", np, err)
				os.Exit(1)
			}
		}
	}
	var err error
	comm, err = mpi.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	comm.Timeout = time.Minute
	code := m.Run()
	if err := mpi.Finalize(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// fail stops the whole job: the other ranks would otherwise wait for this
// one in the next test until they time out.
func fail(t *testing.T, err error) {
	t.Helper()
	t.Error(err)
	if comm.Size() > 1 {
		comm.Abort(1, err)
	}
}

func TestConformance(t *testing.T) {
	algos := []collectives.Algorithm{collectives.Ring, collectives.Tree, collectives.Native, collectives.Auto}
	if err := collectivestest.Run(comm, algos); err != nil {
		fail(t, err)
	}
}

// TestRecvLengthMismatch: a receive expecting more or fewer elements than
// were sent fails with ErrLengthMismatch naming the sender.
func TestRecvLengthMismatch(t *testing.T) {
	if comm.Size() < 2 || comm.Rank() > 1 {
		comm.Barrier()
		return
	}
	for _, want := range []int{4, 6} {
		if comm.Rank() == 0 {
			if err := collectives.Send(comm, make([]float32, 5), 1, 99); err != nil {
				fail(t, err)
			}
			continue
		}
		err := collectives.Recv(comm, make([]float32, want), 0, 99)
		if !errors.Is(err, collectives.ErrLengthMismatch) {
			fail(t, fmt.Errorf("recv %d of 5: got %v, want ErrLengthMismatch", want, err))
		}
	}
	comm.Barrier()
}

func TestBytesWildcards(t *testing.T) {
	n, r := comm.Size(), comm.Rank()
	if r != 0 {
		if err := comm.SendBytes([]byte(fmt.Sprintf("hello from %d", r)), 0, 100+r); err != nil {
			fail(t, err)
		}
	} else {
		seen := map[int]bool{}
		for i := 1; i < n; i++ {
			msg, src, tag, err := comm.RecvBytes(collectives.AnySource, collectives.AnyTag)
			if err != nil {
				fail(t, err)
				return
			}
			if string(msg) != fmt.Sprintf("hello from %d", src) || tag != 100+src || seen[src] {
				fail(t, fmt.Errorf("got %q from %d tag %d", msg, src, tag))
			}
			seen[src] = true
		}
	}
	comm.Barrier()
}

func TestRecvTimeout(t *testing.T) {
	c := *comm
	c.Timeout = 200 * time.Millisecond
	if c.Size() < 2 {
		t.Skip("needs 2 ranks")
	}
	if c.Rank() == 0 {
		err := collectives.Recv(&c, make([]float32, 1), 1, 12345)
		if !errors.Is(err, collectives.ErrTimeout) {
			fail(t, fmt.Errorf("got %v, want ErrTimeout", err))
		}
	}
	comm.Barrier()
}
