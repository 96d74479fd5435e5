package ps

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives/local"
)

func init() { local.AbortExits = false }

// equalWithinAbsOrRel reports whether a and b are within abs or within rel
// of the larger magnitude.
func equalWithinAbsOrRel(a, b, abs, rel float64) bool {
	d := math.Abs(a - b)
	return d <= abs || d <= rel*math.Max(math.Abs(a), math.Abs(b))
}

// assertClose reports the first element of got that differs from want by
// more than abs and rel. It does not stop the test, so worker goroutines may
// call it too.
func assertClose(t *testing.T, what string, got, want []float32, abs, rel float64) bool {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: len %d, want %d", what, len(got), len(want))
		return false
	}
	for i := range got {
		if !equalWithinAbsOrRel(float64(got[i]), float64(want[i]), abs, rel) {
			t.Errorf("%s: [%d] = %v, want %v (abs %g rel %g)", what, i, got[i], want[i], abs, rel)
			return false
		}
	}
	return true
}

// jobResult is what runJob collects.
type jobResult struct {
	servers []ServerStats
	workers []WorkerStats
	errs    []error
}

// runJob runs cfg.Servers servers and size-cfg.Servers workers on a local
// world with the given transport timeout. body is a worker's loop; runJob
// calls Done after it unless body returns an error or done is false.
func runJob(t *testing.T, size int, transportTimeout time.Duration, cfg Config, initial []float32,
	body func(w *Worker) (done bool, err error)) jobResult {
	t.Helper()
	cfg = cfg.withDefaults()
	world := local.NewWorld(size)
	world.SetTimeout(transportTimeout)
	res := jobResult{servers: make([]ServerStats, cfg.Servers), workers: make([]WorkerStats, size)}
	res.errs = world.Run(func(c *local.Comm) error {
		if c.Rank() < cfg.Servers {
			st, err := RunServer(c, cfg, initial)
			res.servers[c.Rank()] = st
			return err
		}
		w, err := NewWorker(c, cfg, len(initial))
		if err != nil {
			return err
		}
		done, err := body(w)
		if err == nil && done {
			err = w.Done()
		}
		res.workers[c.Rank()] = w.Stats()
		return err
	})
	return res
}

func (r jobResult) mustSucceed(t *testing.T) {
	t.Helper()
	failed := false
	for rank, err := range r.errs {
		if err != nil {
			t.Errorf("rank %d: %v", rank, err)
			failed = true
		}
	}
	if failed {
		t.FailNow()
	}
}

// model gathers the servers' final weights into one vector.
func (r jobResult) model() []float32 {
	var out []float32
	for _, s := range r.servers {
		out = append(out, s.Weights...)
	}
	return out
}

// leastSquares is a synthetic regression task: worker k owns rows X[k], y[k]
// with y = X w* + noise; its gradient is X^T (X w - y) / m.
type leastSquares struct {
	d    int
	x    [][][]float32 // [worker][row][feature]
	y    [][]float32
	want []float32
}

func newLeastSquares(seed uint64, workers, rows, d int, noise float64) *leastSquares {
	rng := rand.New(rand.NewPCG(seed, 17))
	ls := &leastSquares{d: d, want: make([]float32, d)}
	for j := range ls.want {
		ls.want[j] = float32(rng.NormFloat64())
	}
	for range workers {
		var xs [][]float32
		var ys []float32
		for range rows {
			row := make([]float32, d)
			dot := 0.0
			for j := range row {
				row[j] = float32(rng.NormFloat64())
				dot += float64(row[j]) * float64(ls.want[j])
			}
			xs = append(xs, row)
			ys = append(ys, float32(dot+noise*rng.NormFloat64()))
		}
		ls.x = append(ls.x, xs)
		ls.y = append(ls.y, ys)
	}
	return ls
}

// grad is worker k's gradient at w (float32 arithmetic, fixed order).
func (ls *leastSquares) grad(k int, w []float32) []float32 {
	g := make([]float32, ls.d)
	for i, row := range ls.x[k] {
		r := -ls.y[k][i]
		for j, v := range row {
			r += v * w[j]
		}
		for j, v := range row {
			g[j] += v * r
		}
	}
	inv := 1 / float32(len(ls.x[k]))
	for j := range g {
		g[j] *= inv
	}
	return g
}

// loss is the mean of (x.w - y)^2 / 2 over every worker's rows.
func (ls *leastSquares) loss(w []float32) float64 {
	s, n := 0.0, 0
	for k := range ls.x {
		for i, row := range ls.x[k] {
			r := -float64(ls.y[k][i])
			for j, v := range row {
				r += float64(v) * float64(w[j])
			}
			s += r * r / 2
			n++
		}
	}
	return s / float64(n)
}
