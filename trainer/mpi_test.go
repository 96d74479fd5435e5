package trainer

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/collectives/mpi"
	"github.com/dml-project/dml/kernels/cpu"
)

// TestMain runs the package's tests once in this process (the in-process
// transport's tests; the MPI ones see a world of one) and, when `go test`
// started it outside mpirun, once more under `mpirun -np 2` and `-np 4`
// restricted to the MPI tests.
func TestMain(m *testing.M) {
	if !mpi.Launched() && os.Getenv("DML_NO_MPIRUN") == "" {
		for _, np := range []int{2, 4} {
			fmt.Printf("=== mpirun -np %d (trainer MPI tests)\n", np)
			os.Args = append(os.Args, "-test.run=^TestMPI")
			if err := mpi.Relaunch(np); err != nil {
				fmt.Fprintf(os.Stderr, "FAIL: trainer tests under mpirun -np %d: %v\n", np, err)
				os.Exit(1)
			}
			os.Args = os.Args[:len(os.Args)-1]
		}
	}
	code := m.Run()
	if mpiStarted {
		mpi.Finalize()
	}
	os.Exit(code)
}

var mpiStarted bool

// TestMPISyncEquivalence: under mpirun, N ranks with batch b end with the
// weights that one rank with batch N·b computes in-process.
func TestMPISyncEquivalence(t *testing.T) {
	if !mpi.Launched() {
		t.Skip("runs under mpirun (TestMain launches it)")
	}
	c, err := mpi.Init()
	if err != nil {
		t.Fatal(err)
	}
	mpiStarted = true
	c.Timeout = time.Minute
	for _, algo := range []string{"ring", "tree", "mpi"} {
		cfg := synthCfg()
		cfg.Allreduce = mustAlgo(algo)
		tr := &Trainer{Comm: c, Backend: cpu.New()}
		got, err := tr.Run(cfg)
		if err != nil {
			c.Abort(1, err)
		}
		one := cfg
		one.Batch = cfg.Batch * c.Size()
		w := local.NewWorld(1)
		ref, err := (&Trainer{Comm: w.Comm(0), Backend: cpu.New()}).Run(one)
		if err != nil {
			t.Fatal(err)
		}
		if d := maxRelDiff(got.Params, ref.Params); d > 2e-5 {
			t.Errorf("rank %d, allreduce %s: weights differ from 1 rank × batch %d by %.3g", c.Rank(), algo, one.Batch, d)
		}
	}
}
