package ps

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dml-project/dml/kernels/optim"
)

// TestBSPEqualsAveragedSGD: BSP through the servers equals synchronous SGD
// on the averaged gradient computed in the test, for 1 and 2 servers and
// each optimizer. Every worker has its own data, so a misplaced or dropped
// gradient changes the result.
func TestBSPEqualsAveragedSGD(t *testing.T) {
	const workers, steps, d = 3, 15, 7 // d = 7: uneven split over 2 servers
	ls := newLeastSquares(1, workers, 16, d, 0.1)
	initial := make([]float32, d)
	for j := range initial {
		initial[j] = float32(j) * 0.1
	}
	for _, servers := range []int{1, 2} {
		for _, opt := range optim.Kinds {
			t.Run(fmt.Sprintf("servers=%d/%v", servers, opt), func(t *testing.T) {
				cfg := Config{Servers: servers, Consistency: BSP, Optimizer: opt, LR: 0.05,
					Momentum: 0.9, WeightDecay: 0.01, TrustCoef: 0.02, Timeout: 10 * time.Second}
				res := runJob(t, servers+workers, time.Second, cfg, initial, func(w *Worker) (bool, error) {
					k := w.rank - servers
					model := make([]float32, d)
					for s := 0; s < steps; s++ {
						if err := w.Pull(model); err != nil {
							return false, err
						}
						if err := w.Push(ls.grad(k, model)); err != nil {
							return false, err
						}
					}
					return true, nil
				})
				res.mustSucceed(t)

				// Reference: averaged-gradient synchronous SGD, sums in worker order.
				ref := append([]float32(nil), initial...)
				u := newUpdater(cfg.withDefaults(), ref)
				// LARS: a trust ratio per server range (each server's part
				// of the one tensor).
				var rs []int
				for _, r := range Partition(d, servers) {
					rs = append(rs, r.Lo)
				}
				u.setTensors(rs, 0)
				for s := 0; s < steps; s++ {
					avg := make([]float32, d)
					for k := 0; k < workers; k++ {
						for j, g := range ls.grad(k, ref) {
							avg[j] += g
						}
					}
					for j := range avg {
						avg[j] /= workers
					}
					u.dense(0, avg)
				}
				assertClose(t, "model", res.model(), ref, 1e-6, 1e-5)
				for _, st := range res.servers {
					if st.Updates != steps || st.Pushes != steps*workers || st.MaxStaleness != 0 {
						t.Errorf("server %d: %d updates, %d pushes, max staleness %d; want %d, %d, 0",
							st.Rank, st.Updates, st.Pushes, st.MaxStaleness, steps, steps*workers)
					}
				}
			})
		}
	}
}

// TestBSPSparseEqualsAveragedSGD: keyed pushes under BSP average over all
// workers (a worker that did not touch a key contributes zero) and update
// only the keys some worker touched.
func TestBSPSparseEqualsAveragedSGD(t *testing.T) {
	const workers, steps, p = 3, 10, 12
	initial := make([]float32, p)
	for j := range initial {
		initial[j] = 1 + float32(j)/8
	}
	// Worker k at step s touches keys j with (j+k+s)%3 == 0 and (j%5 != 4):
	// keys 4 and 9 are never touched by anyone.
	keysOf := func(k, s int) []int64 {
		var ks []int64
		for j := 0; j < p; j++ {
			if (j+k+s)%3 == 0 && j%5 != 4 {
				ks = append(ks, int64(j))
			}
		}
		return ks
	}
	gradOf := func(k int, keys []int64, vals []float32) []float32 {
		g := make([]float32, len(keys))
		for i, key := range keys {
			g[i] = vals[i]*float32(k+1)/4 - float32(key)/16
		}
		return g
	}
	cfg := Config{Servers: 2, Consistency: BSP, LR: 0.1, WeightDecay: 0.05, Timeout: 10 * time.Second}
	res := runJob(t, 2+workers, time.Second, cfg, initial, func(w *Worker) (bool, error) {
		k := w.rank - 2
		for s := 0; s < steps; s++ {
			keys := keysOf(k, s)
			vals := make([]float32, len(keys))
			if err := w.PullKeys(keys, vals); err != nil {
				return false, err
			}
			if err := w.PushKeys(keys, gradOf(k, keys, vals)); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	res.mustSucceed(t)

	ref := append([]float32(nil), initial...)
	for s := 0; s < steps; s++ {
		sum := make([]float32, p)
		touched := make([]bool, p)
		for k := 0; k < workers; k++ {
			keys := keysOf(k, s)
			vals := make([]float32, len(keys))
			for i, key := range keys {
				vals[i] = ref[key]
			}
			for i, g := range gradOf(k, keys, vals) {
				sum[keys[i]] += g
				touched[keys[i]] = true
			}
		}
		for j := range ref {
			if touched[j] {
				g := sum[j] / workers
				ref[j] -= 0.1 * (g + 0.05*ref[j])
			}
		}
	}
	assertClose(t, "model", res.model(), ref, 1e-6, 1e-5)
	if got := res.model(); got[4] != initial[4] || got[9] != initial[9] {
		t.Errorf("untouched keys changed: %v, %v", got[4], got[9])
	}
}

// TestSSPBoundsStaleness: under randomised (seeded) worker delays, no server
// ever serves a pull more than s clocks ahead of the slowest worker, while
// ASP under the same delays does go beyond s (so the check can fail).
func TestSSPBoundsStaleness(t *testing.T) {
	const workers, steps, s = 4, 30, 2
	p := 10
	initial := make([]float32, p)
	run := func(t *testing.T, servers int, cons Consistency) jobResult {
		cfg := Config{Servers: servers, Consistency: cons, Staleness: s, LR: 0.01, Timeout: 10 * time.Second}
		res := runJob(t, servers+workers, time.Second, cfg, initial, func(w *Worker) (bool, error) {
			k := w.rank - servers
			rng := rand.New(rand.NewPCG(42, uint64(k)))
			model := make([]float32, p)
			grad := make([]float32, p)
			for i := 0; i < steps; i++ {
				if err := w.Pull(model); err != nil {
					return false, err
				}
				// Worker 0 is a straggler; the others jitter.
				delay := time.Duration(rng.IntN(300)) * time.Microsecond
				if k == 0 {
					delay += 2 * time.Millisecond
				}
				time.Sleep(delay)
				grad[i%p] = float32(k + 1)
				if err := w.Push(grad); err != nil {
					return false, err
				}
			}
			return true, nil
		})
		res.mustSucceed(t)
		return res
	}
	for _, servers := range []int{1, 2} {
		t.Run(fmt.Sprintf("servers=%d", servers), func(t *testing.T) {
			res := run(t, servers, SSP)
			sawStale := false
			for _, st := range res.servers {
				if st.MaxStaleness > s {
					t.Errorf("server %d served a pull at staleness %d > %d (histogram %v)", st.Rank, st.MaxStaleness, s, st.Staleness.Counts)
				}
				if st.Pulls != workers*steps {
					t.Errorf("server %d: %d pulls, want %d", st.Rank, st.Pulls, workers*steps)
				}
				sawStale = sawStale || st.MaxStaleness > 0
			}
			for _, ws := range res.workers[servers:] {
				if ws.MaxStaleness > s || ws.Pushes != steps || ws.Pulls != steps {
					t.Errorf("worker %d: max staleness %d, %d pushes, %d pulls", ws.Rank, ws.MaxStaleness, ws.Pushes, ws.Pulls)
				}
			}
			if !sawStale {
				t.Errorf("no pull was ever stale: the delays do not exercise SSP")
			}
		})
	}
	t.Run("asp exceeds the bound", func(t *testing.T) {
		res := run(t, 1, ASP)
		if res.servers[0].MaxStaleness <= s {
			t.Errorf("ASP max staleness %d: the test's delays cannot expose an SSP violation", res.servers[0].MaxStaleness)
		}
	})
}

// convergeLS trains the least-squares task under cons and returns the job
// result and the final loss.
func convergeLS(t *testing.T, cfg Config, workers, steps int, slow func(k int) time.Duration) (jobResult, float64, float64) {
	const d = 8
	ls := newLeastSquares(7, workers, 64, d, 0.01)
	initial := make([]float32, d)
	res := runJob(t, cfg.Servers+workers, time.Second, cfg, initial, func(w *Worker) (bool, error) {
		k := w.rank - cfg.Servers
		model := make([]float32, d)
		for s := 0; s < steps; s++ {
			if err := w.Pull(model); err != nil {
				return false, err
			}
			time.Sleep(slow(k))
			if err := w.Push(ls.grad(k, model)); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	res.mustSucceed(t)
	return res, ls.loss(initial), ls.loss(res.model())
}

func TestASPConverges(t *testing.T) {
	for _, servers := range []int{1, 2} {
		t.Run(fmt.Sprintf("servers=%d", servers), func(t *testing.T) {
			cfg := Config{Servers: servers, Consistency: ASP, LR: 0.05, Timeout: 10 * time.Second}
			_, l0, l := convergeLS(t, cfg, 3, 80, func(k int) time.Duration { return time.Duration(k) * 200 * time.Microsecond })
			t.Logf("loss %.4g -> %.4g", l0, l)
			if l > 1e-3 || l > l0/100 {
				t.Errorf("ASP loss %.4g (from %.4g): did not converge", l, l0)
			}
		})
	}
}

func TestDSSPConverges(t *testing.T) {
	const low, high = 1, 4
	for _, servers := range []int{1, 2} {
		t.Run(fmt.Sprintf("servers=%d", servers), func(t *testing.T) {
			cfg := Config{Servers: servers, Consistency: DSSP, StalenessLow: low, StalenessHigh: high,
				LR: 0.05, Timeout: 10 * time.Second}
			// Worker 0 is three times slower than the others.
			res, l0, l := convergeLS(t, cfg, 3, 60, func(k int) time.Duration {
				if k == 0 {
					return 1500 * time.Microsecond
				}
				return 500 * time.Microsecond
			})
			t.Logf("loss %.4g -> %.4g", l0, l)
			if l > 1e-3 || l > l0/100 {
				t.Errorf("DSSP loss %.4g (from %.4g): did not converge", l, l0)
			}
			for _, st := range res.servers {
				t.Logf("server %d: grants %v, staleness %v", st.Rank, st.DSSPGrants, st.Staleness.Counts)
				if len(st.DSSPGrants) != high-low+1 {
					t.Errorf("server %d: grants %v, want %d buckets (r in [0, sU-sL])", st.Rank, st.DSSPGrants, high-low+1)
				}
				if st.MaxStaleness > high {
					t.Errorf("server %d: staleness %d > sU = %d", st.Rank, st.MaxStaleness, high)
				}
			}
		})
	}
}

// TestSparseKeysTwoServers: PullKeys and PushKeys split keys by owner and
// touch exactly those keys.
func TestSparseKeysTwoServers(t *testing.T) {
	const p = 10 // servers own [0,5) and [5,10)
	initial := make([]float32, p)
	for i := range initial {
		initial[i] = float32(i)
	}
	cfg := Config{Servers: 2, Consistency: ASP, LR: 0.5, Timeout: 10 * time.Second}
	res := runJob(t, 3, time.Second, cfg, initial, func(w *Worker) (bool, error) {
		keys := []int64{1, 4, 5, 9}
		got := make([]float32, len(keys))
		if err := w.PullKeys(keys, got); err != nil {
			return false, err
		}
		assertClose(t, "pulled keys", got, []float32{1, 4, 5, 9}, 0, 0)
		if err := w.PushKeys(keys, []float32{2, 2, 4, -2}); err != nil {
			return false, err
		}
		// Only server 1's keys: server 0 still gets an empty push.
		if err := w.PushKeys([]int64{7}, []float32{2}); err != nil {
			return false, err
		}
		if err := w.PullKeys(nil, nil); err != nil {
			return false, err
		}
		all := make([]float32, p)
		if err := w.Pull(all); err != nil {
			return false, err
		}
		assertClose(t, "model", all, []float32{0, 0, 2, 3, 3, 3, 6, 6, 8, 10}, 0, 0)
		return true, nil
	})
	res.mustSucceed(t)
	if res.servers[0].Pushes != 2 || res.servers[1].Pushes != 2 {
		t.Errorf("pushes per server %d, %d; want 2, 2", res.servers[0].Pushes, res.servers[1].Pushes)
	}
}

// TestFiltersEndToEnd: a significantly-modified + float16 worker sends
// fewer bytes, and the model moved by exactly lr times what it sent, which
// is everything pushed minus the residue it still holds.
func TestFiltersEndToEnd(t *testing.T) {
	const p, steps = 64, 20
	initial := make([]float32, p)
	var residue []float32
	pushed := make([]float32, p)
	cfg := Config{Servers: 2, Consistency: ASP, LR: 0.5, Timeout: 10 * time.Second,
		Filters: []FilterSpec{SignificantlyModified{Threshold: 0.25}, Compress{Format: Float16}}}
	res := runJob(t, 3, time.Second, cfg, initial, func(w *Worker) (bool, error) {
		rng := rand.New(rand.NewPCG(9, 9))
		g := make([]float32, p)
		for s := 0; s < steps; s++ {
			for k := range g {
				g[k] = float32(rng.IntN(17)-8) / 64 // exact in float16 and in sums
				pushed[k] += g[k]
			}
			if err := w.Push(g); err != nil {
				return false, err
			}
		}
		residue = append(residue, Residue(w.Filters()[0])...)
		return true, nil
	})
	res.mustSucceed(t)
	ws := res.workers[2]
	if ws.PushBytes >= ws.PushBytesUnfiltered/2 {
		t.Errorf("push bytes %d, unfiltered %d: filters saved too little", ws.PushBytes, ws.PushBytesUnfiltered)
	}
	want := make([]float32, p)
	for k := range want {
		want[k] = initial[k] - 0.5*(pushed[k]-residue[k])
	}
	assertClose(t, "model", res.model(), want, 0, 0)
	t.Logf("%v", ws)
}

// TestUnevenStepsBSP: workers that run different numbers of steps under BSP
// finish: a worker's Done releases the rounds it will not join.
func TestUnevenStepsBSP(t *testing.T) {
	cfg := Config{Servers: 2, Consistency: BSP, LR: 0.1, Timeout: 5 * time.Second}
	res := runJob(t, 5, time.Second, cfg, make([]float32, 6), func(w *Worker) (bool, error) {
		steps := 2 + 2*(w.rank-2) // 2, 4, 6 steps
		model := make([]float32, 6)
		g := []float32{1, 1, 1, 1, 1, 1}
		for s := 0; s < steps; s++ {
			if err := w.Pull(model); err != nil {
				return false, err
			}
			if err := w.Push(g); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	res.mustSucceed(t)
	// Six rounds, each averaging gradients of 1: the model moved by 6*lr.
	assertClose(t, "model", res.model(), []float32{-0.6, -0.6, -0.6, -0.6, -0.6, -0.6}, 1e-6, 1e-6)
	if u := res.servers[0].Updates; u != 6 {
		t.Errorf("%d updates, want 6", u)
	}
}

// TestWorkerAfterDone: a Worker may not be used after Done.
func TestWorkerAfterDone(t *testing.T) {
	cfg := Config{Servers: 1, Consistency: ASP, Timeout: 5 * time.Second}
	res := runJob(t, 2, time.Second, cfg, make([]float32, 2), func(w *Worker) (bool, error) {
		if err := w.Done(); err != nil {
			return false, err
		}
		if err := w.Push(make([]float32, 2)); !errors.Is(err, ErrDone) {
			t.Errorf("push after done: %v, want ErrDone", err)
		}
		if err := w.Done(); !errors.Is(err, ErrDone) {
			t.Errorf("second done: %v, want ErrDone", err)
		}
		return false, nil
	})
	res.mustSucceed(t)
}
