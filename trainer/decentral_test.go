package trainer

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/dml-project/dml/trainer/decentral"
	"github.com/dml-project/dml/trainer/gossip"
	"github.com/dml-project/dml/trainer/internal/numtest"
)

// withGossipTest sets the test hooks for one test: rank r starts from
// the shared initial model plus a rank-dependent offset, and the models
// are frozen. It returns the ranks' models at the end (filled in by Run)
// and their starting sum.
func withGossipTest(t *testing.T, n int) (end [][]float32, startSum func() []float64) {
	t.Helper()
	var mu sync.Mutex
	end = make([][]float32, n)
	starts := make([][]float32, n)
	decentral.GossipTest.Init = func(rank int, x []float32) {
		for i := range x {
			x[i] += float32(rank*(i%7)) - 0.25*float32(rank*rank)
		}
		mu.Lock()
		starts[rank] = append([]float32(nil), x...)
		mu.Unlock()
	}
	decentral.GossipTest.Frozen = true
	decentral.GossipTest.End = func(rank int, x []float32) {
		mu.Lock()
		end[rank] = append([]float32(nil), x...)
		mu.Unlock()
	}
	t.Cleanup(func() {
		decentral.GossipTest.Init, decentral.GossipTest.Frozen, decentral.GossipTest.End = nil, false, nil
	})
	return end, func() []float64 {
		sum := make([]float64, len(starts[0]))
		for _, s := range starts {
			for i, v := range s {
				sum[i] += float64(v)
			}
		}
		return sum
	}
}

func gossipCfg(sync Sync, top gossip.Topology) Config {
	cfg := synthCfg()
	cfg.Sync, cfg.Topology = sync, top
	cfg.Data.Samples = 400
	return cfg
}

// TestDPSGDZeroGradientReachesAverage: with the gradient switched off,
// D-PSGD's mixing alone takes every rank's model to the exact average of
// the starting models (the mixing matrix is doubly stochastic), on each
// topology.
func TestDPSGDZeroGradientReachesAverage(t *testing.T) {
	for _, tc := range []struct {
		top gossip.Topology
		n   int
	}{{gossip.Ring, 2}, {gossip.Ring, 5}, {gossip.Exp, 5}, {gossip.Torus, 6}} {
		t.Run(fmt.Sprintf("%v/%d", tc.top, tc.n), func(t *testing.T) {
			end, startSum := withGossipTest(t, tc.n)
			cfg := gossipCfg(SyncDPSGD, tc.top)
			cfg.Epochs = 200
			cfg.EvalEvery = 0
			res := mustRun(t, tc.n, cfg)
			sum := startSum()
			for r := range tc.n {
				for i, v := range end[r] {
					want := sum[i] / float64(tc.n)
					if d := math.Abs(float64(v) - want); d > 1e-4*math.Max(1, math.Abs(want)) {
						t.Fatalf("rank %d param %d: %v after %d steps, want the average %v", r, i, v, res[0].Steps, want)
					}
				}
			}
			for i, v := range res[0].Params {
				if d := math.Abs(float64(v) - sum[i]/float64(tc.n)); d > 1e-4*math.Max(1, math.Abs(sum[i])) {
					t.Fatalf("saved weights: param %d is %v, want the average %v", i, v, sum[i]/float64(tc.n))
				}
			}
		})
	}
}

// TestDPSGDOneStepMixes: after exactly one step with frozen models, each
// rank holds W·x of the starting models (checked against the weights
// computed here), and the sum over ranks is unchanged.
func TestDPSGDOneStepMixes(t *testing.T) {
	const n = 4
	end, _ := withGossipTest(t, n)
	cfg := gossipCfg(SyncDPSGD, gossip.Exp)
	cfg.MaxSteps = 1
	var starts [n][]float32
	init := decentral.GossipTest.Init
	decentral.GossipTest.Init = func(rank int, x []float32) {
		init(rank, x)
		starts[rank] = append([]float32(nil), x...)
	}
	mustRun(t, n, cfg)
	g, _ := gossip.New(gossip.Exp, n)
	for r := range n {
		self, w := g.Weights(r)
		for i := range end[r] {
			want := self * float64(starts[r][i])
			for k, q := range g.Adj[r] {
				want += w[k] * float64(starts[q][i])
			}
			if d := math.Abs(float64(end[r][i]) - want); d > 1e-5*math.Max(1, math.Abs(want)) {
				t.Fatalf("rank %d param %d: %v, want %v", r, i, end[r][i], want)
			}
		}
	}
}

// TestDecentralizedLearns: both strategies train the synthetic task on
// 2–5 ranks to a good consensus accuracy, and every rank returns the same
// consensus weights.
func TestDecentralizedLearns(t *testing.T) {
	for _, sync := range []Sync{SyncDPSGD, SyncADPSGD} {
		for _, n := range []int{2, 3, 5} {
			t.Run(fmt.Sprintf("%v/%d", sync, n), func(t *testing.T) {
				cfg := gossipCfg(sync, gossip.Ring)
				cfg.Epochs = 4
				cfg.Overlap = n != 3 // 3 ranks: the messages before the gradient
				res := mustRun(t, n, cfg)
				if res[0].TestAcc < 0.8 {
					t.Errorf("test accuracy %.3f, want ≥ 0.8; epochs:\n%v", res[0].TestAcc, res[0].Epochs)
				}
				for r := 1; r < n; r++ {
					if !equalFloats(res[r].Params, res[0].Params) {
						t.Fatalf("rank %d's final weights differ from rank 0's", r)
					}
				}
				if len(res[0].Epochs) == 0 || res[0].Epochs[0].GossipStats == nil {
					t.Fatalf("no gossip figures in the epochs: %+v", res[0].Epochs)
				}
				last := res[0].Epochs[len(res[0].Epochs)-1]
				if last.Epoch != cfg.Epochs || last.TestAcc == nil {
					t.Errorf("last epoch %d (test acc %v), want %d, evaluated", last.Epoch, last.TestAcc, cfg.Epochs)
				}
				if c := last.Consensus; !(c > 0 && c < 0.5) {
					t.Errorf("consensus distance %v, want in (0, 0.5)", c)
				}
			})
		}
	}
}

func equalFloats(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestDPSGDDeterministic: two runs with the same flags give the same
// weights bit for bit (the mixing sums in a fixed order).
func TestDPSGDDeterministic(t *testing.T) {
	cfg := gossipCfg(SyncDPSGD, gossip.Exp)
	a := mustRun(t, 4, cfg)
	b := mustRun(t, 4, cfg)
	if !equalFloats(a[0].Params, b[0].Params) {
		t.Fatal("two dpsgd runs with the same seed differ")
	}
}

// TestADPSGDKeepsSum: with frozen models, AD-PSGD's averagings keep the
// sum of the ranks' models (up to rounding), for 2–8 ranks with random
// per-rank delays, and the job ends in bounded time (no deadlock).
func TestADPSGDKeepsSum(t *testing.T) {
	for n := 2; n <= 8; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			end, startSum := withGossipTest(t, n)
			cfg := gossipCfg(SyncADPSGD, gossip.Exp)
			cfg.Epochs = 3
			rng := rand.New(rand.NewPCG(uint64(n), 7))
			cfg.Straggle = Straggle{Rank: rng.IntN(n), Factor: 1 + 8*rng.Float64()}
			done := make(chan struct{})
			var res []*Result
			var errs []error
			go func() {
				defer close(done)
				res, errs = runWorld(t, n, cfg, nil)
			}()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatalf("%d ranks: no end after 60 s (deadlock?)", n)
			}
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			sum := startSum()
			for i := range sum {
				got := 0.0
				for r := range n {
					got += float64(end[r][i])
				}
				if d := math.Abs(got - sum[i]); d > 1e-4*math.Max(1, math.Abs(sum[i])) {
					t.Fatalf("param %d: the models sum to %v after averaging, %v before", i, got, sum[i])
				}
			}
			_ = res
		})
	}
}

// TestAverageKeepsSum is the invariant on a random schedule of pairwise
// averagings over 2–8 models, checked after every averaging, and the two
// sides of a pair computing it on their own (AverageInto) agree bit for
// bit.
func TestAverageKeepsSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 2; n <= 8; n++ {
		b, err := gossip.NewBipartite(gossip.Ring, n)
		if err != nil {
			t.Fatal(err)
		}
		x := make([][]float32, n)
		for r := range x {
			x[r] = make([]float32, 33)
			for i := range x[r] {
				x[r][i] = float32(rng.NormFloat64() * 10)
			}
		}
		total := func() []float64 {
			s := make([]float64, 33)
			for _, m := range x {
				for i, v := range m {
					s[i] += float64(v)
				}
			}
			return s
		}
		want := total()
		for range 500 {
			var a int
			for a = rng.IntN(n); !b.Active(a); a = rng.IntN(n) {
			}
			p := b.Adj[a][rng.IntN(len(b.Adj[a]))]
			ma, mp := append([]float32(nil), x[a]...), append([]float32(nil), x[p]...)
			gossip.AverageInto(x[a], mp) // the active side, with the passive's reply
			gossip.AverageInto(x[p], ma) // the passive side, with the request
			if !equalFloats(x[a], x[p]) {
				t.Fatalf("n=%d: ranks %d and %d differ after averaging", n, a, p)
			}
			for i, v := range total() {
				if math.Abs(v-want[i]) > 1e-3 {
					t.Fatalf("n=%d: sum of param %d moved from %v to %v", n, i, want[i], v)
				}
			}
		}
	}
}

func TestDecentralizedUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		ranks int
		want  string
	}{
		{gossipCfg(SyncDPSGD, gossip.Torus), 5, "Topology"},
		{gossipCfg(SyncADPSGD, gossip.Ring), 1, "Sync"},
		{gossipCfg(SyncADPSGD, gossip.Torus), 6, "Sync"},
	} {
		err := tc.cfg.ValidateWorld(tc.ranks)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.want || !errors.Is(err, ErrUsage) {
			t.Errorf("%v %v on %d ranks: %v, want a usage error on %s", tc.cfg.Sync, tc.cfg.Topology, tc.ranks, err, tc.want)
		}
	}
	if err := gossipCfg(SyncDPSGD, gossip.Ring).ValidateWorld(1); err != nil {
		t.Errorf("dpsgd on 1 rank: %v", err)
	}
}

// TestADPSGDMaxStepsExact: under adpsgd --max-steps is the ranks' total
// exactly, on 2–5 ranks and across an epoch boundary (the bug: rank 0's
// cap overshot by the steps run while reports travelled, 9 steps for a
// cap of 1), and 0 steps saves the initial weights, as under allreduce.
func TestADPSGDMaxStepsExact(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		for _, steps := range []int{0, 1, 7, 61} {
			t.Run(fmt.Sprintf("%d ranks/%d steps", n, steps), func(t *testing.T) {
				cfg := gossipCfg(SyncADPSGD, gossip.Exp)
				cfg.Epochs, cfg.MaxSteps = 3, steps
				res := mustRun(t, n, cfg)
				for r, got := range res {
					if got.Steps != steps {
						t.Fatalf("rank %d: %d steps, want exactly %d", r, got.Steps, steps)
					}
				}
				if steps == 0 { // the consensus of n equal models: their float32 mean
					ref := cfg
					ref.Sync = SyncAllreduce
					if d := numtest.MaxRelDiff(res[0].Params, mustRun(t, 1, ref)[0].Params); d > 1e-6 {
						t.Fatalf("0 steps: the weights are %g from the initial ones", d)
					}
				}
			})
		}
	}
}
