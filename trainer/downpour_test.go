package trainer

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/ckpt"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/engine"
	"github.com/dml-project/dml/trainer/internal/numtest"
	"github.com/dml-project/dml/trainer/model"
	"github.com/dml-project/dml/trainer/paramserver"
)

// TestDownpourDefaultsUnchanged: --fetch-every 1 --push-every 1 train the
// weights the ps strategy trained before the flags, bit for bit: given as
// 1 (Config's 0 and 1 mean the same), and through the Downpour code path
// itself (forceDownpour), which with periods of 1 must push each step's
// gradient as it is and fetch at every step.
func TestDownpourDefaultsUnchanged(t *testing.T) {
	// bsp on 2 workers; asp on 1 (with more, the result depends on the
	// order the pushes arrive in).
	for _, tc := range []struct {
		cons  ps.Consistency
		ranks int
	}{{ps.BSP, 3}, {ps.ASP, 2}} {
		for _, opt := range []optim.Kind{optim.Momentum, optim.Adam} {
			t.Run(fmt.Sprintf("%v/%v", tc.cons, opt), func(t *testing.T) {
				cfg := psCfg(tc.cons, 1)
				cfg.Opt.Kind, cfg.Shuffle = opt, true
				want := finalParams(t, mustRun(t, tc.ranks, cfg))
				ones := cfg
				ones.PS.FetchEvery, ones.PS.PushEvery = 1, 1
				if got := finalParams(t, mustRun(t, tc.ranks, ones)); !slices.Equal(got, want) {
					t.Errorf("fetch/push every 1: weights differ by %.3g", numtest.MaxRelDiff(got, want))
				}
				if ones.Hash() != cfg.Hash() {
					t.Errorf("configuration hash changed with fetch/push every 1")
				}
				paramserver.ForceDownpour = true
				defer func() { paramserver.ForceDownpour = false }()
				if got := finalParams(t, mustRun(t, tc.ranks, cfg)); !slices.Equal(got, want) {
					t.Errorf("the Downpour path with periods of 1: weights differ by %.3g", numtest.MaxRelDiff(got, want))
				}
			})
		}
	}
}

// TestDownpourPushesLocalSum: one worker under bsp, plain SGD on the
// server, --fetch-every = --push-every = 3, 5 steps: the servers' weights
// are w0 − lr·(g1+g2+g3) after the first period, where each g is the
// gradient on the worker's local copy, stepped by plain SGD after each
// step; then the worker fetches those weights and the last two steps are
// pushed at the end of training (the flush). The expected weights are
// computed here from the model and the batches the worker loaded.
func TestDownpourPushesLocalSum(t *testing.T) {
	const k, steps = 3, 5
	cfg := psCfg(ps.BSP, 1)
	cfg.Opt.Kind, cfg.Shuffle, cfg.MaxSteps = optim.SGD, true, steps
	cfg.PS.FetchEvery, cfg.PS.PushEvery = k, k
	type batch struct {
		set *data.Dense
		idx []int
		gb  int
	}
	var mu sync.Mutex
	var batches []batch
	engine.LoadHook = func(rank, _, _ int, set *data.Dense, idx []int, gb int) {
		mu.Lock()
		defer mu.Unlock()
		if rank == 1 { // the worker
			batches = append(batches, batch{set, slices.Clone(idx), gb})
		}
	}
	res := mustRun(t, 2, cfg)
	engine.LoadHook = nil
	if len(batches) != steps {
		t.Fatalf("the worker loaded %d batches, want %d", len(batches), steps)
	}
	arch := res[0].Arch
	be := cpu.New()
	m, err := model.New(arch, be, cfg.Batch)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	np := arch.NumParams()
	server := arch.InitParams(cfg.Seed)
	local := slices.Clone(server)
	acc := make([]float32, np)
	host := make([]float32, np+model.GradStats)
	sgd := optim.Config{Kind: optim.SGD, LR: cfg.Opt.LR}
	for s, b := range batches {
		if err := be.Upload(m.Params, local); err != nil {
			t.Fatal(err)
		}
		if _, err := m.LoadBatch(b.set, b.idx); err != nil {
			t.Fatal(err)
		}
		if err := m.Step(1/float32(b.gb), nil); err != nil { // bsp's scale: workers / global batch
			t.Fatal(err)
		}
		if err := be.Download(host, m.Grads); err != nil {
			t.Fatal(err)
		}
		g := host[:np]
		for i := range acc {
			acc[i] += g[i]
		}
		optim.Step(sgd, local, g, nil) // the worker's local step
		if (s+1)%k == 0 || s+1 == steps {
			optim.Step(sgd, server, acc, nil) // the server applies the pushed sum
			clear(acc)
			copy(local, server) // the fetch
		}
	}
	got := finalParams(t, res)
	if !slices.Equal(got, server) {
		t.Fatalf("server weights differ from w0 − lr·Σg over local copies by %.3g", numtest.MaxRelDiff(got, server))
	}
	// Not the same as pushing every step (the test can tell them apart).
	every := cfg
	every.PS.FetchEvery, every.PS.PushEvery = 0, 0
	if slices.Equal(finalParams(t, mustRun(t, 2, every)), got) {
		t.Errorf("the same weights as pushing every step")
	}
}

// TestDownpourConverges: two in-process workers and a server, periods of
// 4 under bsp, and fetch 2 / push 4 under asp: the loss goes down, the
// accuracy is near what pushing every step reaches, and the pushes take
// about a quarter of the bytes.
func TestDownpourConverges(t *testing.T) {
	for _, tc := range []struct {
		cons         ps.Consistency
		fetch, push  int
		maxByteShare float64
	}{
		{ps.BSP, 4, 4, 0.35},
		{ps.ASP, 2, 4, 0.35},
	} {
		t.Run(fmt.Sprintf("%v/fetch%d/push%d", tc.cons, tc.fetch, tc.push), func(t *testing.T) {
			cfg := psCfg(tc.cons, 1)
			cfg.Data.Samples, cfg.Epochs, cfg.Shuffle = 1000, 4, true
			cfg.Opt.Kind, cfg.Opt.LR = optim.SGD, 0.1
			base := mustRun(t, 3, cfg)
			cfg.PS.FetchEvery, cfg.PS.PushEvery = tc.fetch, tc.push
			res := mustRun(t, 3, cfg)
			w := workerResult(res, 1)
			// Under asp the first epoch's mean loss depends on how the
			// workers interleave (on a loaded machine one may run far
			// ahead and the first epoch already learn most): the loss must
			// fall, by how much is the scheduler's; the accuracy below is
			// the measure of convergence.
			first, last := w.Epochs[0].Loss, w.Epochs[len(w.Epochs)-1].Loss
			if !(last < first) {
				t.Errorf("loss %.4f → %.4f over %d epochs: want it to fall", first, last, len(w.Epochs))
			}
			if res[0].TestAcc < 0.85 || res[0].TestAcc < base[0].TestAcc-0.05 {
				t.Errorf("test accuracy %.3f (every step: %.3f)", res[0].TestAcc, base[0].TestAcc)
			}
			share := float64(res[0].PS.PushBytes) / float64(base[0].PS.PushBytes)
			if share > tc.maxByteShare {
				t.Errorf("pushes took %d bytes, %.2f of pushing every step's %d", res[0].PS.PushBytes, share, base[0].PS.PushBytes)
			}
		})
	}
}

// TestDownpourCheckpointResume: under bsp with periods of 3, a run that
// checkpoints every 4 steps and is resumed from its checkpoint at step 8
// ends with the weights of a straight run that checkpoints at the same
// steps, bit for bit (the checkpoints end periods early: paramserver/downpour.go), and
// the checkpoint records the pushes.
func TestDownpourCheckpointResume(t *testing.T) {
	for _, opt := range []optim.Kind{optim.Adagrad, optim.Adam} {
		t.Run(opt.String(), func(t *testing.T) {
			cfg := synthCfg()
			cfg.Sync, cfg.PS.Servers = SyncPS, 1
			cfg.Opt.Kind, cfg.Shuffle, cfg.Epochs = opt, true, 3
			cfg.PS.FetchEvery, cfg.PS.PushEvery = 3, 3
			straight := cfg
			straight.MaxSteps = 30
			res, errs := runCkpt(t, 3, straight, Checkpointing{Dir: t.TempDir(), Every: 4}, 0)
			noErrs(t, errs)
			want := finalParams(t, res)

			dir := t.TempDir()
			first := cfg
			first.MaxSteps = 11
			_, errs = runCkpt(t, 3, first, Checkpointing{Dir: dir, Every: 4, Keep: 3}, 0)
			noErrs(t, errs)
			at8 := filepath.Join(dir, ckpt.Name(8))
			ck := readCheckpointFile(t, at8)
			// Steps 1-3, 4 (checkpoint), 5-7, 8 (checkpoint): 4 pushes.
			if ck.Meta.Pushes != 4 {
				t.Errorf("checkpoint at step 8 records %d pushes, want 4", ck.Meta.Pushes)
			}
			res, errs = runCkpt(t, 3, straight, Checkpointing{Dir: dir, Every: 4, ResumeFile: at8}, 0)
			noErrs(t, errs)
			if got := finalParams(t, res); !slices.Equal(got, want) {
				t.Fatalf("resumed from step 8: weights differ by %.3g from the straight run", numtest.MaxRelDiff(got, want))
			}
		})
	}
}

// TestDownpourRefused: the settings Downpour cannot train with.
func TestDownpourRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		set   func(*Config)
		field string
	}{
		{"negative", func(c *Config) { c.Sync, c.PS.FetchEvery = SyncPS, -1 }, "PS.FetchEvery"},
		{"allreduce", func(c *Config) { c.PS.PushEvery = 2 }, "PS.PushEvery"},
		{"bsp-unequal", func(c *Config) { c.Sync, c.PS.FetchEvery, c.PS.PushEvery = SyncPS, 2, 4 }, "PS.PushEvery"},
		{"schedule", func(c *Config) {
			c.Sync, c.PS.FetchEvery, c.PS.PushEvery, c.LRSchedule = SyncPS, 2, 2, "cosine"
		}, "PS.PushEvery"},
	} {
		cfg := synthCfg()
		tc.set(&cfg)
		var ce *ConfigError
		if err := cfg.Validate(); !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: %v, want a ConfigError on %s", tc.name, err, tc.field)
		}
	}
	ok := synthCfg()
	ok.Sync, ok.PS.Consistency, ok.PS.FetchEvery, ok.PS.PushEvery = SyncPS, ps.ASP, 2, 5
	if err := ok.Validate(); err != nil {
		t.Errorf("asp with fetch 2, push 5: %v", err)
	}
}
