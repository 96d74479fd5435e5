// Package mpitest runs the trainer under mpirun: N real ranks train and
// their weights are compared with in-process references. It is a package
// of its own so that package trainer tests without OpenMPI.
package mpitest

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/collectives/mpi"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer"
	"github.com/dml-project/dml/trainer/internal/numtest"
)

// TestMain, when `go test` started it outside mpirun, runs the MPI tests
// under `mpirun -np 2, 4` (AllReduce) and `-np 3, 5` (parameter server),
// and then not again in this process (they have run: they are not skips).
// Under mpirun, or with DML_NO_MPIRUN set, it runs them here; outside
// mpirun they skip, saying why.
func TestMain(m *testing.M) {
	if !mpi.Launched() && os.Getenv("DML_NO_MPIRUN") == "" {
		for _, job := range []struct {
			np    int
			tests string
		}{{2, "^TestMPISync"}, {4, "^TestMPISync"}, {3, "^TestMPIPS"}, {5, "^TestMPIPS"}} {
			fmt.Printf("=== mpirun -np %d %s (trainer/mpitest)\n", job.np, job.tests)
			os.Args = append(os.Args, "-test.run="+job.tests)
			if err := mpi.Relaunch(job.np); err != nil {
				fmt.Fprintf(os.Stderr, "FAIL: trainer tests under mpirun -np %d: %v\n", job.np, err)
				os.Exit(1)
			}
			os.Args = os.Args[:len(os.Args)-1]
		}
		os.Args = append(os.Args, "-test.skip=^TestMPI")
	}
	code := m.Run()
	if mpiStarted {
		mpi.Finalize()
	}
	os.Exit(code)
}

var mpiStarted bool

func mpiComm(t *testing.T) *mpi.Comm {
	if !mpi.Launched() {
		t.Skip("runs under mpirun (TestMain launches it)")
	}
	c, err := mpi.Init()
	if err != nil {
		t.Fatal(err)
	}
	mpiStarted = true
	c.Timeout = time.Minute
	return c
}

// TestMPIPS: under mpirun -np 3 and 5, with 1 and 2 servers, BSP through
// the parameter server equals AllReduce over the workers (computed here
// in-process), and SSP, ASP and DSSP converge within their staleness bounds.
func TestMPIPS(t *testing.T) {
	c := mpiComm(t)
	for _, servers := range []int{1, 2} {
		workers := c.Size() - servers
		cfg := synthCfg()
		cfg.Sync, cfg.PS.Servers, cfg.PS.Consistency, cfg.Timeout = trainer.SyncPS, servers, ps.BSP, 30*time.Second
		got, err := (&trainer.Trainer{Comm: c, Backend: cpu.New()}).Run(cfg)
		if err != nil {
			c.Abort(1, err)
		}
		ar := cfg
		ar.Sync = trainer.SyncAllreduce
		w := local.NewWorld(workers)
		refs := make([]*trainer.Result, workers)
		for r, err := range w.Run(func(lc *local.Comm) error {
			var err error
			refs[lc.Rank()], err = (&trainer.Trainer{Comm: lc, Backend: cpu.New()}).Run(ar)
			return err
		}) {
			if err != nil {
				t.Fatalf("reference rank %d: %v", r, err)
			}
		}
		if d := numtest.MaxRelDiff(got.Params, refs[0].Params); d > 2e-5 {
			t.Errorf("rank %d, %d servers: BSP weights differ from AllReduce's by %.3g", c.Rank(), servers, d)
		}
		for _, cons := range []ps.Consistency{ps.SSP, ps.ASP, ps.DSSP} {
			cfg := cfg
			cfg.PS.Consistency, cfg.Data.Samples, cfg.Data.Noise, cfg.Epochs = cons, 1000, 1, 4
			cfg.Opt.Kind, cfg.Opt.LR = optim.SGD, 0.05
			res, err := (&trainer.Trainer{Comm: c, Backend: cpu.New()}).Run(cfg)
			if err != nil {
				c.Abort(1, err)
			}
			if res.TestAcc < 0.85 {
				t.Errorf("rank %d, %s, %d servers: test accuracy %.3f < 0.85", c.Rank(), cons, servers, res.TestAcc)
			}
			if cons == ps.SSP && res.PS.MaxStaleness > cfg.PS.Staleness {
				t.Errorf("rank %d, ssp: staleness %d > %d", c.Rank(), res.PS.MaxStaleness, cfg.PS.Staleness)
			}
		}
	}
}

// TestMPISyncEquivalence: under mpirun, N ranks with batch b end with the
// weights that one rank with batch N·b computes in-process, with one
// gradient bucket and with a bucket per layer; and the per-layer buckets
// reduced while the backward pass runs (on the communication goroutine)
// give the weights of reducing them after it, bit for bit.
func TestMPISyncEquivalence(t *testing.T) {
	c := mpiComm(t)
	for _, algo := range []collectives.Algorithm{collectives.Ring, collectives.Tree, collectives.Native, collectives.Auto} {
		for _, bucketBytes := range []int{0, 4} {
			cfg := synthCfg()
			cfg.Allreduce, cfg.BucketBytes = algo, bucketBytes
			run := func(cfg trainer.Config) *trainer.Result {
				got, err := (&trainer.Trainer{Comm: c, Backend: cpu.New()}).Run(cfg)
				if err != nil {
					c.Abort(1, err)
				}
				return got
			}
			got := run(cfg)
			one := cfg
			one.Batch = cfg.Batch * c.Size()
			w := local.NewWorld(1)
			ref, err := (&trainer.Trainer{Comm: w.Comm(0), Backend: cpu.New()}).Run(one)
			if err != nil {
				t.Fatal(err)
			}
			if d := numtest.MaxRelDiff(got.Params, ref.Params); d > 2e-5 {
				t.Errorf("rank %d, allreduce %s, buckets of %d bytes: weights differ from 1 rank × batch %d by %.3g",
					c.Rank(), algo, bucketBytes, one.Batch, d)
			}
			cfg.Overlap = !cfg.Overlap
			if other := run(cfg); !slices.Equal(other.Params, got.Params) {
				t.Errorf("rank %d, allreduce %s, buckets of %d bytes: overlap %v and %v give different weights",
					c.Rank(), algo, bucketBytes, cfg.Overlap, !cfg.Overlap)
			}
		}
	}
}

func synthCfg() trainer.Config {
	cfg := trainer.DefaultConfig()
	cfg.Data = trainer.DataConfig{Name: "synthetic", Samples: 203, Features: 12, Classes: 3, Noise: 1}
	cfg.Hidden = []int{16, 8}
	cfg.Epochs = 2
	cfg.Batch = 8
	cfg.Shuffle = false
	cfg.Opt.LR = 0.1
	return cfg
}
