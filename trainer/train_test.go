package trainer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/internal/syncbuf"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/engine"
	"github.com/dml-project/dml/trainer/internal/numtest"
	"github.com/dml-project/dml/trainer/model"
)

func init() { local.AbortExits = false }

func synthCfg() Config {
	cfg := DefaultConfig()
	cfg.Data = DataConfig{Name: "synthetic", Samples: 203, Features: 12, Classes: 3, Noise: 1}
	cfg.Hidden = []int{16, 8}
	cfg.Epochs = 2
	cfg.Batch = 8
	cfg.Shuffle = false
	cfg.Opt.LR = 0.1
	// Read by LARS only (the tests that take every optimizer): large
	// enough that its steps move the weights in a few steps.
	cfg.Opt.TrustCoef = 0.02
	return cfg
}

// runWorld trains cfg on n in-process ranks and returns every rank's result.
func runWorld(t *testing.T, n int, cfg Config, perRank func(r int, c *Config)) ([]*Result, []error) {
	return runWorldFrom(t, n, cfg, nil, perRank)
}

// runWorldWith is runWorld on the backends newBackend opens for each rank.
func runWorldWith(t *testing.T, n int, cfg Config, newBackend func(rank int) kernels.Backend) ([]*Result, []error) {
	return runWorldOn(t, n, cfg, nil, nil, newBackend)
}

// runWorldFrom is runWorld resuming every rank from start (if not nil).
func runWorldFrom(t *testing.T, n int, cfg Config, start *TrainState, perRank func(r int, c *Config)) ([]*Result, []error) {
	return runWorldOn(t, n, cfg, start, perRank, func(int) kernels.Backend { return cpu.New() })
}

func runWorldOn(t *testing.T, n int, cfg Config, start *TrainState, perRank func(r int, c *Config), newBackend func(rank int) kernels.Backend) ([]*Result, []error) {
	t.Helper()
	w := local.NewWorld(n)
	w.SetTimeout(20 * time.Second)
	res := make([]*Result, n)
	errs := w.Run(func(c *local.Comm) error {
		mine := cfg
		if perRank != nil {
			perRank(c.Rank(), &mine)
		}
		tr := &Trainer{Comm: c, Backend: newBackend(c.Rank())}
		if start != nil {
			st := start.Clone()
			tr.Start = &st
		}
		var err error
		res[c.Rank()], err = tr.Run(mine)
		return err
	})
	return res, errs
}

func mustRun(t *testing.T, n int, cfg Config) []*Result {
	t.Helper()
	res, errs := runWorld(t, n, cfg, nil)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return res
}

// checkOneRankEquivalent trains cfg on n ranks and on 1 rank with batch
// n·b, and fails t where a rank's weights differ from the 1-rank ones by
// more than float rounding, where ranks disagree, or where training barely
// moved the weights (the comparison would prove nothing). It returns the
// n ranks' results.
func checkOneRankEquivalent(t *testing.T, n int, cfg Config) []*Result {
	t.Helper()
	one := cfg
	one.Batch = cfg.Batch * n
	ref := mustRun(t, 1, one)[0]
	got := mustRun(t, n, cfg)
	for r, res := range got {
		if d := numtest.MaxRelDiff(res.Params, ref.Params); d > 2e-5 {
			t.Errorf("ranks %d, rank %d: weights differ from 1 rank × batch %d by %.3g (relative)", n, r, one.Batch, d)
		}
		if numtest.MaxRelDiff(res.Params, got[0].Params) != 0 {
			t.Errorf("ranks %d, rank %d's weights differ from rank 0's", n, r)
		}
	}
	if d := numtest.MaxRelDiff(ref.Params, ref.Arch.InitParams(cfg.Seed)); d < 1e-3 {
		t.Errorf("training barely moved the weights (%.3g): the comparison proves nothing", d)
	}
	return got
}

// TestSyncEquivalence: synchronous training on N ranks with batch b gives
// the weights of 1 rank with batch N·b (same sample order), for every
// optimizer, including epochs whose last global batch is partial.
func TestSyncEquivalence(t *testing.T) {
	for _, opt := range optim.Kinds {
		cfg := synthCfg()
		cfg.Opt.Kind = opt
		if opt == optim.Adagrad {
			cfg.Opt.LR = 0.05
		}
		for _, n := range []int{1, 2, 3, 4} {
			t.Run(fmt.Sprintf("opt=%s/ranks=%d", opt, n), func(t *testing.T) {
				checkOneRankEquivalent(t, n, cfg)
			})
		}
	}
}

// TestShuffleChangesOrder guards the equivalence test: with shuffling on,
// the weights must differ from the unshuffled run.
func TestShuffleChangesOrder(t *testing.T) {
	cfg := synthCfg()
	a := mustRun(t, 2, cfg)[0]
	cfg.Shuffle = true
	b := mustRun(t, 2, cfg)[0]
	c := mustRun(t, 2, cfg)[0]
	if numtest.MaxRelDiff(a.Params, b.Params) == 0 {
		t.Error("shuffled and unshuffled runs gave identical weights")
	}
	if numtest.MaxRelDiff(b.Params, c.Params) != 0 {
		t.Error("two shuffled runs with one seed differ: not deterministic")
	}
}

func TestConverges(t *testing.T) {
	for _, model := range []ModelKind{MLP, Softmax, Logreg} {
		t.Run(model.String(), func(t *testing.T) {
			cfg := synthCfg()
			cfg.Model = model
			cfg.Data.Samples, cfg.Data.Noise, cfg.Epochs, cfg.Shuffle = 1000, 1, 5, true
			if model == Logreg {
				cfg.Data.Classes = 2
			}
			res := mustRun(t, 2, cfg)[0]
			first, last := res.Epochs[0], res.Epochs[len(res.Epochs)-1]
			if !(last.Loss < first.Loss) || res.TestAcc < 0.85 {
				t.Errorf("loss %.4f → %.4f, test accuracy %.3f: want falling loss and accuracy ≥ 0.85", first.Loss, last.Loss, res.TestAcc)
			}
		})
	}
}

// TestNonFiniteStops: a diverging run stops on every rank naming the step
// and layer, with one gradient bucket and with a bucket per layer reduced
// during the backward pass (the race detector watches the check wait for
// the buckets still in flight).
func TestNonFiniteStops(t *testing.T) {
	for _, bucketBytes := range []int{0, 4} {
		for _, overlap := range []bool{false, true} {
			cfg := synthCfg()
			cfg.Opt.LR = 1e30
			cfg.BucketBytes, cfg.Overlap = bucketBytes, overlap
			_, errs := runWorld(t, 2, cfg, nil)
			for r, err := range errs {
				if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "step") || !strings.Contains(err.Error(), "layer") {
					t.Errorf("buckets %d bytes, overlap %v, rank %d: got %v, want ErrNonFinite naming the step and layer", bucketBytes, overlap, r, err)
				}
			}
		}
	}
}

func TestConfigMismatch(t *testing.T) {
	_, errs := runWorld(t, 3, synthCfg(), func(r int, c *Config) {
		if r == 2 {
			c.Hidden = []int{16, 9}
		}
	})
	for r, err := range errs {
		var me *ConfigMismatchError
		if !errors.Is(err, ErrConfigMismatch) || !errors.As(err, &me) || !strings.HasPrefix(err.Error(), "rank 2 started") ||
			me.Field != "Hidden" || (r == 2) != (me.Value == "[16,9]") {
			t.Errorf("rank %d: got %v, want ErrConfigMismatch naming rank 2 and Hidden with this rank's value", r, err)
		}
	}
}

// TestConfigMismatchNested: the first differing field is named by its
// path, also when it is nested and other ranks differ too.
func TestConfigMismatchNested(t *testing.T) {
	_, errs := runWorld(t, 3, synthCfg(), func(r int, c *Config) {
		if r > 0 {
			c.Opt.LR *= 2
		}
	})
	for r, err := range errs {
		var me *ConfigMismatchError
		if !errors.As(err, &me) || me.Field != "Opt.LR" || !strings.HasPrefix(err.Error(), "ranks 1, 2 started") {
			t.Errorf("rank %d: got %v, want the mismatch of ranks 1, 2 in Opt.LR", r, err)
		}
	}
}

func TestMoreRanksThanSamples(t *testing.T) {
	cfg := synthCfg()
	cfg.Data.Samples = 3
	_, errs := runWorld(t, 4, cfg, nil)
	for r, err := range errs {
		if !errors.Is(err, data.ErrMoreRanksThanSamples) || !errors.Is(err, ErrUsage) {
			t.Errorf("rank %d: got %v, want ErrMoreRanksThanSamples, a usage error", r, err)
		}
	}
}

// TestMaxStepsZeroSavesInitialWeights: --max-steps 0 trains nothing and
// writes the broadcast initial weights; the checkpoint reads back exactly.
func TestMaxStepsZeroSavesInitialWeights(t *testing.T) {
	cfg := synthCfg()
	cfg.MaxSteps = 0
	cfg.Save = filepath.Join(t.TempDir(), "w.npz")
	res := mustRun(t, 2, cfg)[0]
	if res.Steps != 0 {
		t.Fatalf("ran %d steps, want 0", res.Steps)
	}
	arch, params, err := model.LoadNPZ(cfg.Save)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(arch.Sizes) != fmt.Sprint(res.Arch.Sizes) || numtest.MaxRelDiff(params, res.Arch.InitParams(cfg.Seed)) != 0 {
		t.Fatalf("saved %v, want the initial weights of %v", arch.Sizes, res.Arch.Sizes)
	}
}

func TestMaxSteps(t *testing.T) {
	cfg := synthCfg()
	cfg.MaxSteps = 5
	if res := mustRun(t, 2, cfg)[0]; res.Steps != 5 {
		t.Fatalf("ran %d steps, want 5", res.Steps)
	}
}

func TestGlobalBatch(t *testing.T) {
	// 10 samples, 3 ranks, batch 2: shards of 4, 3, 3 → steps of 6 and 4.
	s := engine.Schedule{N: 10, Ranks: 3, Batch: 2}
	if got := []int{s.StepsPerEpoch(), s.GlobalBatch(0), s.GlobalBatch(1)}; fmt.Sprint(got) != "[2 6 4]" {
		t.Fatalf("steps, batches = %v, want [2 6 4]", got)
	}
}

// TestIDXClassesInferred: IDX labels with one corrupt byte (200) make a
// 201-class model: training says so ("classes: 201, from labels 0 … 200
// of FILE"), and an expected class count (--classes 10) refuses the data
// instead, naming what was inferred.
func TestIDXClassesInferred(t *testing.T) {
	dir := t.TempDir()
	const n, side = 40, 4
	img := binary.BigEndian.AppendUint32(nil, 0x0803)
	for _, d := range []uint32{n, side, side} {
		img = binary.BigEndian.AppendUint32(img, d)
	}
	lab := binary.BigEndian.AppendUint32(nil, 0x0801)
	lab = binary.BigEndian.AppendUint32(lab, n)
	for i := range n {
		for j := range side * side {
			img = append(img, byte(i*j))
		}
		l := byte(i % 10)
		if i == 17 {
			l = 200 // the corrupt byte
		}
		lab = append(lab, l)
	}
	ip, lp := filepath.Join(dir, "images"), filepath.Join(dir, "labels")
	if err := os.WriteFile(ip, img, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lp, lab, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := synthCfg()
	cfg.Data = DataConfig{Name: "idx", Train: ip + "," + lp}
	cfg.Epochs = 1
	var out syncbuf.Buffer
	errs := local.NewWorld(1).Run(func(c *local.Comm) error {
		_, err := (&Trainer{Comm: c, Backend: cpu.New(), Out: &out}).Run(cfg)
		return err
	})
	noErrs(t, errs)
	if !strings.Contains(out.String(), "classes: 201, from labels 0 … 200 of "+lp) {
		t.Errorf("output %q does not say 201 classes were inferred from %s", out.String(), lp)
	}
	cfg.Data.ExpectClasses = 10
	errs = local.NewWorld(1).Run(func(c *local.Comm) error {
		_, err := (&Trainer{Comm: c, Backend: cpu.New()}).Run(cfg)
		return err
	})
	var ce *ConfigError
	if !errors.As(errs[0], &ce) || ce.Field != "Data.Classes" || !strings.Contains(errs[0].Error(), "10: the data has 201 classes (labels 0 … 200 of "+lp+")") {
		t.Errorf("expecting 10 classes: %v", errs[0])
	}
}
