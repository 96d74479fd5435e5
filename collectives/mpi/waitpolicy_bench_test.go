package mpi_test

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/mpi"
)

// BenchmarkWaitPolicy times AllReduce under the spinning wait policy and
// the back-off one (mpi.WaitPolicy), taking turns iteration by iteration in
// one job so that a noisy neighbour slows both alike. mpi (MPI_Allreduce)
// does not wait through the shim: its column is the control. Rank 0 prints
// one line per algorithm and size: median µs over iterations of the
// slowest rank, spin then back-off, and their ratio. It runs its sweep once
// whatever b.N; start it with a fixed count:
//
//	go test -c -o /tmp/mpi.test ./collectives/mpi
//	mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader \
//	    /tmp/mpi.test -test.run x -test.bench WaitPolicy -test.benchtime 1x
func BenchmarkWaitPolicy(b *testing.B) {
	if comm.Size() < 2 {
		b.Skip("needs 2 or more ranks")
	}
	defer mpi.SetWaitPolicy(mpi.DefaultWaitPolicy)
	// DML_WAIT_B replaces the back-off policy (ParseWaitPolicy's syntax).
	backoff, err := mpi.ParseWaitPolicy(os.Getenv("DML_WAIT_B"))
	if err != nil {
		b.Fatal(err)
	}
	policies := []mpi.WaitPolicy{mpi.SpinWaitPolicy, backoff}
	algos := []collectives.Algorithm{collectives.Ring, collectives.Tree, collectives.Native}
	const iters, warmup = 30, 3
	n := comm.Size()
	if comm.Rank() == 0 {
		fmt.Printf("np=%d  algo  bytes  spin_us  backoff_us  backoff/spin\n", n)
	}
	for size := 4 << 10; size <= 16<<20; size *= 4 {
		buf := make([]float32, size/4)
		ars := make([]*collectives.Allreducer, len(algos))
		for a, algo := range algos {
			ars[a] = collectives.NewAllreducer(comm, algo)
		}
		times := make([]float32, len(policies)*len(algos)*iters)
		for it := -warmup; it < iters; it++ {
			for p, pol := range policies {
				if err := mpi.SetWaitPolicy(pol); err != nil {
					b.Fatal(err)
				}
				for a, ar := range ars {
					for i := range buf {
						buf[i] = float32(comm.Rank() + i%7)
					}
					comm.Barrier()
					t0 := time.Now()
					if err := ar.Allreduce(buf, collectives.Sum); err != nil {
						b.Fatal(err)
					}
					if it >= 0 {
						times[(p*len(algos)+a)*iters+it] = float32(time.Since(t0).Seconds() * 1e6)
					}
				}
			}
		}
		all := make([]float32, n*len(times))
		if err := collectives.Allgather(comm, times, all); err != nil {
			b.Fatal(err)
		}
		if comm.Rank() != 0 {
			continue
		}
		med := func(p, a int) float64 {
			v := make([]float64, iters)
			for it := range v {
				for q := 0; q < n; q++ {
					v[it] = max(v[it], float64(all[q*len(times)+(p*len(algos)+a)*iters+it]))
				}
			}
			slices.Sort(v)
			return (v[iters/2-1] + v[iters/2]) / 2
		}
		for a, algo := range algos {
			s, k := med(0, a), med(1, a)
			fmt.Printf("np=%d  %-4s  %8d  %8.1f  %8.1f  %5.2f\n", n, algo, size, s, k, k/s)
		}
	}
}
