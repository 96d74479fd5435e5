package ps

import (
	"bufio"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dml-project/dml/kernels/optim"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden_weights.txt from this code")

const goldenFile = "testdata/golden_weights.txt"

// goldenCase is one small, deterministic job whose final weights are pinned
// bit for bit in testdata/golden_weights.txt. The file was written by the
// server as it was before it became a state machine (commit "ps: golden
// weights of small deterministic jobs"), so a refactor that changes one bit
// of BSP arithmetic, of the round order or of the optimizer maths fails here.
type goldenCase struct {
	name    string
	workers int
	cfg     Config
	sparse  bool
}

func goldenCases() []goldenCase {
	var cs []goldenCase
	for _, servers := range []int{1, 2} {
		for _, opt := range optim.Kinds {
			cs = append(cs, goldenCase{
				name:    fmt.Sprintf("bsp/dense/servers=%d/%v", servers, opt),
				workers: 3,
				cfg: Config{Servers: servers, Consistency: BSP, Optimizer: opt, LR: 0.05,
					Momentum: 0.9, WeightDecay: 0.01, Beta1: 0.9, Beta2: 0.999, TrustCoef: 0.02},
			})
		}
		cs = append(cs, goldenCase{
			name: fmt.Sprintf("bsp/sparse/servers=%d/adagrad", servers), workers: 3, sparse: true,
			cfg: Config{Servers: servers, Consistency: BSP, Optimizer: optim.Adagrad, LR: 0.1, WeightDecay: 0.05},
		})
	}
	cs = append(cs,
		goldenCase{name: "bsp/dense/servers=2/momentum/sigmod+fp16", workers: 2,
			cfg: Config{Servers: 2, Consistency: BSP, Optimizer: optim.Momentum, LR: 0.05, Momentum: 0.9,
				Filters: []FilterSpec{SignificantlyModified{Threshold: 0.01}, Compress{Format: Float16}}}},
		// One worker: the order of pushes is fixed under every model, so the
		// apply-at-once path (SSP, ASP, DSSP) is pinned too.
		goldenCase{name: "asp/dense/servers=2/momentum", workers: 1,
			cfg: Config{Servers: 2, Consistency: ASP, Optimizer: optim.Momentum, LR: 0.05, Momentum: 0.9, WeightDecay: 0.01}},
		goldenCase{name: "ssp/sparse/servers=1/adagrad", workers: 1, sparse: true,
			cfg: Config{Servers: 1, Consistency: SSP, Staleness: 2, Optimizer: optim.Adagrad, LR: 0.1}},
	)
	return cs
}

// run trains the case over the local transport and returns the servers'
// final weights.
func (gc goldenCase) run(t *testing.T) []float32 {
	const d, steps = 11, 12 // d = 11: uneven split over 2 servers
	ls := newLeastSquares(3, gc.workers, 16, d, 0.1)
	initial := make([]float32, d)
	for j := range initial {
		initial[j] = float32(j)*0.1 - 0.3
	}
	// Worker k at step s touches keys j with (j+k+s)%3 != 1 (sparse cases).
	keysOf := func(k, s int) []int64 {
		var ks []int64
		for j := range d {
			if (j+k+s)%3 != 1 {
				ks = append(ks, int64(j))
			}
		}
		return ks
	}
	cfg := gc.cfg
	cfg.Timeout = 10 * time.Second
	res := runJob(t, cfg.Servers+gc.workers, time.Second, cfg, initial, func(w *Worker) (bool, error) {
		k := w.rank - cfg.Servers
		model := make([]float32, d)
		for s := range steps {
			if err := w.Pull(model); err != nil {
				return false, err
			}
			g := ls.grad(k, model)
			if !gc.sparse {
				if err := w.Push(g); err != nil {
					return false, err
				}
				continue
			}
			keys := keysOf(k, s)
			vals := make([]float32, len(keys))
			if err := w.PullKeys(keys, vals); err != nil {
				return false, err
			}
			gk := make([]float32, len(keys))
			for i, key := range keys {
				gk[i] = g[key] + vals[i]/8
			}
			if err := w.PushKeys(keys, gk); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	res.mustSucceed(t)
	return res.model()
}

func formatGolden(name string, w []float32) string {
	var b strings.Builder
	b.WriteString(name)
	for _, v := range w {
		fmt.Fprintf(&b, " %08x", math.Float32bits(v))
	}
	return b.String()
}

// TestGoldenWeights: every case's final weights equal, bit for bit, those
// recorded in testdata/golden_weights.txt (go test -run TestGoldenWeights
// -update-golden rewrites the file; do that only for an intended change of
// arithmetic, and say so in the commit).
func TestGoldenWeights(t *testing.T) {
	var lines []string
	for _, gc := range goldenCases() {
		lines = append(lines, formatGolden(gc.name, gc.run(t)))
	}
	if *updateGolden {
		if err := os.WriteFile(goldenFile, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, _, _ := strings.Cut(sc.Text(), " ")
		want[name] = sc.Text()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(lines) {
		t.Errorf("%s has %d cases, the test %d", goldenFile, len(want), len(lines))
	}
	for _, got := range lines {
		name, _, _ := strings.Cut(got, " ")
		if want[name] != got {
			t.Errorf("weights differ from the recorded run:\n got %s\nwant %s", got, want[name])
		}
	}
}
