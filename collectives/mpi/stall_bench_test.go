package mpi

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/stall"
)

// BenchmarkStallInspector times AllReduce with the stall inspector and the
// MPI_Allreduce watchdog off (the transport before issue 10) and on (the
// --stall-warn default, 60 s, and a 5 min abort), taking turns iteration by
// iteration in one job (CONVENTIONS 12). Rank 0 prints one line per
// algorithm and size: median µs over iterations of the slowest rank, off
// then on, and their ratio. It runs its sweep once whatever b.N:
//
//	go test -c -o /tmp/mpi.test ./collectives/mpi
//	mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader \
//	    /tmp/mpi.test -test.run x -test.bench StallInspector -test.benchtime 1x
func BenchmarkStallInspector(b *testing.B) {
	w := world
	if w == nil || w.Size() < 2 {
		b.Skip("needs 2 or more ranks")
	}
	off, on := *w, *w
	off.Stall, off.ops, off.native = stall.Policy{}, nil, nil
	on.Stall = stall.Policy{Warn: stall.DefaultWarn, Abort: DefaultTimeout}
	comms := []*Comm{&off, &on}
	algos := []collectives.Algorithm{collectives.Ring, collectives.Tree, collectives.Native}
	const iters, warmup = 200, 10
	n := w.Size()
	if w.Rank() == 0 {
		fmt.Printf("np=%d  algo  bytes  off_us  on_us  on/off\n", n)
	}
	for _, size := range []int{64, 4 << 10, 64 << 10, 1 << 20} {
		buf := make([]float32, size/4)
		ars := make([][]*collectives.Allreducer, len(comms))
		for p, c := range comms {
			for _, algo := range algos {
				ars[p] = append(ars[p], collectives.NewAllreducer(c, algo))
			}
		}
		times := make([]float32, len(comms)*len(algos)*iters)
		for it := -warmup; it < iters; it++ {
			for a := range algos {
				for p := range comms {
					for i := range buf {
						buf[i] = float32(w.Rank() + i%7)
					}
					if err := w.Barrier(); err != nil {
						b.Fatal(err)
					}
					t0 := time.Now()
					if err := ars[p][a].Allreduce(buf, collectives.Sum); err != nil {
						b.Fatal(err)
					}
					if it >= 0 {
						times[(p*len(algos)+a)*iters+it] = float32(time.Since(t0).Seconds() * 1e6)
					}
				}
			}
		}
		all := make([]float32, n*len(times))
		if err := collectives.Allgather(w, times, all); err != nil {
			b.Fatal(err)
		}
		if w.Rank() != 0 {
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
			x, y := med(0, a), med(1, a)
			fmt.Printf("np=%d  %-4s  %8d  %8.2f  %8.2f  %5.3f\n", n, algo, size, x, y, y/x)
		}
	}
}
