package bench

import (
	"fmt"
	"slices"
	"time"

	"github.com/dml-project/dml/collectives"
)

// AllreduceConfig is one `dml bench allreduce` sweep. Sizes run from
// MinBytes to MaxBytes, multiplied by Factor each time (nccl-tests' -b, -e,
// -f); each size is timed Iters times after Warmup untimed runs.
type AllreduceConfig struct {
	MinBytes, MaxBytes int64
	Factor             int64
	Iters, Warmup      int
	Algorithms         []collectives.Algorithm
	Op                 collectives.Op
	// SegmentBytes is the ring's pipelining unit (0: the default).
	SegmentBytes int
	// LengthCheck makes each AllReduce first check that every rank passed
	// the same length, as Allreducer does by default for ring and auto.
	// Off by default: dml train agrees on the lengths at start-up and
	// skips it (Allreducer.SkipLengthCheck), and the bench measures the
	// algorithms as training runs them — all alike (issue 29: auto, which
	// alone paid it, read 0.74–0.82 of mpi at 4 KiB for about 1 µs of
	// check).
	LengthCheck bool
}

// DefaultAllreduceConfig is what `dml bench allreduce` runs with no flags.
func DefaultAllreduceConfig() AllreduceConfig {
	return AllreduceConfig{
		MinBytes: 4 << 10, MaxBytes: 64 << 20, Factor: 2, Iters: 20, Warmup: 5,
		Algorithms: []collectives.Algorithm{collectives.Ring, collectives.Tree, collectives.Native},
		Op:         collectives.Sum,
	}
}

// Validate reports the first bad field as a usage error.
func (c AllreduceConfig) Validate() error {
	switch {
	case c.MinBytes <= 0 || c.MaxBytes <= 0:
		return fmt.Errorf("sizes must be greater than 0 (got -b %d -e %d)", c.MinBytes, c.MaxBytes)
	case c.MinBytes > c.MaxBytes:
		return fmt.Errorf("min size -b %s is above max size -e %s", FormatSize(c.MinBytes), FormatSize(c.MaxBytes))
	case c.MinBytes < 4:
		return fmt.Errorf("min size -b %d is below one float32 (4 bytes)", c.MinBytes)
	case c.MaxBytes > 1<<33:
		return fmt.Errorf("max size -e %s is above 8G", FormatSize(c.MaxBytes))
	case c.Factor < 2:
		return fmt.Errorf("step factor -f %d must be at least 2", c.Factor)
	case c.Iters < 1 || c.Iters > MaxIters:
		return fmt.Errorf("iterations -n %d must be in 1..%d", c.Iters, MaxIters)
	case c.Warmup < 0 || c.Warmup > MaxIters:
		return fmt.Errorf("warm-up iterations -w %d must be in 0..%d", c.Warmup, MaxIters)
	case len(c.Algorithms) == 0:
		return fmt.Errorf("no algorithm given (--algo ring,tree,mpi)")
	case c.SegmentBytes < 0:
		return fmt.Errorf("segment size %d must not be negative", c.SegmentBytes)
	}
	return nil
}

// MaxIters bounds -n and -w: the timings of every iteration are kept
// (a float32 per algorithm and iteration), so -n MaxInt failed to allocate.
const MaxIters = 1 << 20

// Sizes lists the message sizes of the sweep, each a whole number of float32s.
func (c AllreduceConfig) Sizes() []int64 {
	var out []int64
	for s := c.MinBytes; s <= c.MaxBytes; s *= c.Factor {
		out = append(out, s/4*4)
		if s > c.MaxBytes/c.Factor {
			break
		}
	}
	return out
}

// Row is one line of the table.
type Row struct {
	Algo    string  `json:"algo"`
	Size    int64   `json:"size"`
	Count   int     `json:"count"`
	TimeUS  float64 `json:"time_us"`
	AlgBW   float64 `json:"algbw"`
	BusBW   float64 `json:"busbw"`
	Wrong   int     `json:"wrong"`
	Ranks   int     `json:"ranks"`
	Samples int     `json:"-"`
}

// fill gives rank r element i a small integer, so that the sum over ranks
// is exact and known: Σ_r (r+1)·(i mod 97) = n(n+1)/2 · (i mod 97).
func fill(buf []float32, r int) {
	for i := range buf {
		buf[i] = float32((r + 1) * (i % 97))
	}
}

func wrong(buf []float32, n int, op collectives.Op) int {
	bad := 0
	for i, v := range buf {
		want := float64(n*(n+1)/2) * float64(i%97)
		if op == collectives.Avg {
			want /= float64(n)
		}
		d := float64(v) - want
		if d > 1e-5*want+1e-6 || d < -(1e-5*want+1e-6) {
			bad++
		}
	}
	return bad
}

// RunAllreduce runs the sweep on every rank (all ranks must call it with the
// same config) and calls emit on rank 0 for each size once it is measured,
// with one row per algorithm. The algorithms take turns iteration by
// iteration, so that a noisy neighbour slows them alike and their ratio
// stays fair. A row's time is the median over iterations of the slowest
// rank's time; #wrong counts the elements, summed over ranks, that differ
// from the exact expected value after the last iteration.
func RunAllreduce(c collectives.Comm, cfg AllreduceConfig, emit func([]Row)) ([]Row, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := c.Size()
	sizes := cfg.Sizes()
	buf := make([]float32, sizes[len(sizes)-1]/4)
	nalg := len(cfg.Algorithms)
	ars := make([]*collectives.Allreducer, nalg)
	for i, algo := range cfg.Algorithms {
		ars[i] = &collectives.Allreducer{Comm: c, Algorithm: algo, SegmentBytes: cfg.SegmentBytes, SkipLengthCheck: !cfg.LengthCheck}
	}
	times := make([]float32, nalg*cfg.Iters) // [algo][iter]
	all := make([]float32, n*len(times))
	bad := make([]float32, nalg)
	var rows []Row
	for _, size := range sizes {
		b := buf[:size/4]
		for it := -cfg.Warmup; it < cfg.Iters; it++ {
			for a, ar := range ars {
				fill(b, c.Rank())
				if err := c.Barrier(); err != nil {
					return rows, err
				}
				t0 := time.Now()
				if err := ar.Allreduce(b, cfg.Op); err != nil {
					return rows, fmt.Errorf("%s, %d bytes: %w", cfg.Algorithms[a], size, err)
				}
				if it >= 0 {
					times[a*cfg.Iters+it] = float32(time.Since(t0).Seconds() * 1e6)
				}
				if it == cfg.Iters-1 {
					bad[a] = float32(wrong(b, n, cfg.Op))
				}
			}
		}
		// The slowest rank sets each iteration's time; #wrong is summed.
		if err := collectives.Allgather(c, times, all); err != nil {
			return rows, err
		}
		if err := collectives.Allreduce(c, bad, collectives.Sum, collectives.Tree); err != nil {
			return rows, err
		}
		var batch []Row
		for a, algo := range cfg.Algorithms {
			perIter := make([]float64, cfg.Iters)
			for it := range perIter {
				for q := 0; q < n; q++ {
					perIter[it] = max(perIter[it], float64(all[q*len(times)+a*cfg.Iters+it]))
				}
			}
			us := median(perIter)
			algbw := float64(size) / us / 1e3 // bytes/µs = MB/s; /1e3 → GB/s
			batch = append(batch, Row{Algo: string(algo), Size: size, Count: int(size / 4), TimeUS: us, AlgBW: algbw,
				BusBW: algbw * 2 * float64(n-1) / float64(n), Wrong: int(bad[a]), Ranks: n, Samples: cfg.Iters})
		}
		rows = append(rows, batch...)
		if c.Rank() == 0 && emit != nil {
			emit(batch)
		}
	}
	return rows, nil
}

func median(v []float64) float64 {
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
