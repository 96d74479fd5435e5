package trainer

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/ckpt"
	"github.com/dml-project/dml/trainer/gossip"
	"github.com/dml-project/dml/trainer/internal/numtest"
	"github.com/dml-project/dml/trainer/model"
)

// runCkpt trains cfg on n in-process ranks with checkpoint settings ck;
// stopAfter > 0 makes rank n-1 ask to stop at its stopAfter-th step
// boundary (as a signal would).
func runCkpt(t *testing.T, n int, cfg Config, ck Checkpointing, stopAfter int) ([]*Result, []error) {
	t.Helper()
	return runCkptStop(t, n, cfg, ck, n-1, stopAfter)
}

// runCkptStop is runCkpt with the stop request on rank stopRank, at its
// stopAfter-th call of Stop (a server calls it at every receive).
func runCkptStop(t *testing.T, n int, cfg Config, ck Checkpointing, stopRank, stopAfter int) ([]*Result, []error) {
	t.Helper()
	return runTrainers(t, n, cfg, ck, func(c *local.Comm, tr *Trainer) {
		calls := 0
		tr.Stop = func() bool {
			calls++
			return stopAfter > 0 && c.Rank() == stopRank && calls >= stopAfter
		}
	})
}

// runWorldCkpt trains cfg with checkpoint settings ck and no Stop.
func runWorldCkpt(t *testing.T, n int, cfg Config, ck Checkpointing) ([]*Result, []error) {
	t.Helper()
	return runTrainers(t, n, cfg, ck, nil)
}

// runOut is runWorldCkpt with rank 0 printing to out.
func runOut(t *testing.T, n int, cfg Config, ck Checkpointing, out *strings.Builder) ([]*Result, []error) {
	t.Helper()
	return runTrainers(t, n, cfg, ck, func(c *local.Comm, tr *Trainer) {
		if c.Rank() == 0 {
			tr.Out = out
		}
	})
}

// runTrainers trains cfg on n in-process ranks (cpu backend), each with
// its own copy of ck, after set (when not nil) has set up each Trainer.
func runTrainers(t *testing.T, n int, cfg Config, ck Checkpointing, set func(*local.Comm, *Trainer)) ([]*Result, []error) {
	t.Helper()
	w := local.NewWorld(n)
	w.SetTimeout(20 * time.Second)
	res := make([]*Result, n)
	errs := w.Run(func(c *local.Comm) error {
		mine := ck
		tr := &Trainer{Comm: c, Backend: cpu.New(), Checkpoint: &mine}
		if set != nil {
			set(c, tr)
		}
		var err error
		res[c.Rank()], err = tr.Run(cfg)
		return err
	})
	return res, errs
}

func noErrs(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// finalParams is the weights every rank ended with (checked equal).
func finalParams(t *testing.T, res []*Result) []float32 {
	t.Helper()
	for r := range res {
		if !slices.Equal(res[r].Params, res[0].Params) {
			t.Fatalf("rank %d ends with other weights than rank 0", r)
		}
	}
	return res[0].Params
}

// finalState is the batch norms' running statistics the ranks end with
// (Result.ModelState: every rank's is the ranks' average), nil for models
// without.
func finalState(t *testing.T, res []*Result) []float32 {
	t.Helper()
	for r := range res {
		if !slices.Equal(res[r].ModelState, res[0].ModelState) {
			t.Fatalf("rank %d ends with other batch-norm statistics than rank 0", r)
		}
	}
	return res[0].ModelState
}

type ckptCase struct {
	name  string
	ranks int
	cfg   func(*Config)
}

func ckptCases() []ckptCase {
	return []ckptCase{
		{"allreduce", 2, func(c *Config) {}},
		{"ps-bsp-1server", 3, func(c *Config) { c.Sync, c.PS.Servers = SyncPS, 1 }},
		{"ps-bsp-2servers", 4, func(c *Config) { c.Sync, c.PS.Servers = SyncPS, 2 }},
		{"ps-bsp-sigmod", 3, func(c *Config) { c.Sync, c.PS.Servers, c.PS.Filters = SyncPS, 1, "sigmod:0.01" }},
		{"dpsgd", 3, func(c *Config) { c.Sync, c.Topology, c.Epochs = SyncDPSGD, gossip.Ring, 4 }},
		// Rates that depend on the position (schedule.go), clipping.
		{"allreduce-cosine-warmup-clip", 2, func(c *Config) { c.LRSchedule, c.WarmupEpochs, c.ClipNorm = "cosine", 0.5, 0.5 }},
		{"ps-bsp-2servers-step-scaled", 4, func(c *Config) {
			c.Sync, c.PS.Servers, c.LRSchedule, c.WarmupEpochs, c.LRScaleRanks, c.ClipNorm = SyncPS, 2, "step:1:0.5", 0.3, true, 1
		}},
		{"dpsgd-step-clip", 3, func(c *Config) {
			c.Sync, c.Topology, c.Epochs, c.LRSchedule, c.ClipNorm = SyncDPSGD, gossip.Ring, 4, "step:1,2:0.5", 0.5
		}},
		// Compressed AllReduce: the error-feedback residues are each rank's.
		{"compress-fp16-ef", 3, func(c *Config) { c.Compress, c.ErrorFeedback, c.Epochs = CompressFP16, true, 4 }},
		{"compress-bf16", 2, func(c *Config) { c.Compress = CompressBF16 }},
		// Gradient accumulation: steps of 3 micro-batches (checkpoints at
		// step boundaries).
		{"accumulate", 2, func(c *Config) { c.Accumulate, c.Epochs = 3, 7 }},
		{"accumulate-ps-bsp", 3, func(c *Config) { c.Accumulate, c.Epochs, c.Sync, c.PS.Servers = 3, 7, SyncPS, 1 }},
		{"accumulate-dpsgd", 2, func(c *Config) { c.Accumulate, c.Epochs, c.Sync = 3, 7, SyncDPSGD }},
		// Local SGD: every rank's own model and optimizer state.
		{"localsgd", 3, func(c *Config) { c.LocalSteps, c.Epochs = 3, 4 }},
		{"lenet5", 2, func(c *Config) { c.Model, c.Data, c.Augment = LeNet5, cnnCfg().Data, "crop,flip" }},
		{"lenet5-ps-bsp", 3, func(c *Config) { c.Model, c.Data, c.Sync, c.PS.Servers = LeNet5, cnnCfg().Data, SyncPS, 1 }},
		{"batchnorm", 2, func(c *Config) { b := bnCfg(); c.Model, c.Net, c.Data = b.Model, b.Net, b.Data }},
		// Dropout: the masks after a resume are the ones the straight
		// run drew (a function of the sample, the epoch and the seed).
		{"dropout", 2, func(c *Config) { d := dropoutCfg(); c.Model, c.Net, c.Data = d.Model, d.Net, d.Data }},
		{"dropout-ps-bsp", 3, func(c *Config) {
			d := dropoutCfg()
			c.Model, c.Net, c.Data, c.Sync, c.PS.Servers = d.Model, d.Net, d.Data, SyncPS, 1
		}},
		// A GPT (the text's windows, AdamW's state, a tied head).
		{"gpt", 2, func(c *Config) { gptInto(c) }},
		{"gpt-ps-bsp", 3, func(c *Config) { gptInto(c); c.Sync, c.PS.Servers = SyncPS, 1 }},
		{"batchnorm-dpsgd", 3, func(c *Config) {
			b := bnCfg()
			c.Model, c.Net, c.Data, c.Sync, c.Topology, c.Epochs = b.Model, b.Net, b.Data, SyncDPSGD, gossip.Ring, 4
		}},
		// SyncBatchNorm where the ranks step together.
		{"batchnorm-syncbn-ps-bsp", 3, func(c *Config) {
			b := bnCfg()
			c.Model, c.Net, c.Data, c.Sync, c.PS.Servers, c.SyncBN = b.Model, b.Net, b.Data, SyncPS, 1, true
		}},
		{"batchnorm-syncbn-dpsgd", 2, func(c *Config) {
			b := bnCfg()
			c.Model, c.Net, c.Data, c.Sync, c.SyncBN, c.Epochs = b.Model, b.Net, b.Data, SyncDPSGD, true, 4
		}},
	}
}

// TestCheckpointResume: a run that writes checkpoints and stops (at
// --max-steps, or on a stop request of one rank) and is resumed from the
// newest checkpoint ends with the same weights, bit for bit, as a run
// straight through, for allreduce and ps bsp with 1 and 2 servers.
func TestCheckpointResume(t *testing.T) {
	for _, tc := range ckptCases() {
		for _, opt := range optim.Kinds {
			// The networks' cases take one optimizer (the MLP's cover
			// every optimizer's state; a CNN's is the same vectors): they
			// are the slow ones under -race.
			if (strings.HasPrefix(tc.name, "lenet5") || strings.HasPrefix(tc.name, "batchnorm") || strings.HasPrefix(tc.name, "compress") || strings.HasPrefix(tc.name, "dropout")) && opt != optim.Momentum ||
				strings.HasPrefix(tc.name, "gpt") && opt != optim.AdamW {
				continue
			}
			t.Run(fmt.Sprintf("%s/%v", tc.name, opt), func(t *testing.T) {
				cfg := synthCfg()
				cfg.Opt.Kind, cfg.Shuffle, cfg.Epochs = opt, true, 3
				tc.cfg(&cfg)
				straight := cfg
				straight.MaxSteps = 30
				res, errs := runCkpt(t, tc.ranks, straight, Checkpointing{}, 0)
				noErrs(t, errs)
				want, wantState := finalParams(t, res), finalState(t, res)

				dir := t.TempDir()
				first := cfg
				first.MaxSteps = 11 // checkpoints at 4 and 8, and the final one at 11
				_, errs = runCkpt(t, tc.ranks, first, Checkpointing{Dir: dir, Every: 4, Keep: 2}, 0)
				noErrs(t, errs)
				files, _ := ckpt.List(dir)
				if len(files) != 2 || filepath.Base(files[0]) != ckpt.Name(11) || filepath.Base(files[1]) != ckpt.Name(8) {
					t.Fatalf("checkpoints %v, want steps 11 and 8", files)
				}
				// From step 8 (as if killed before the final checkpoint), and from
				// the end of the --max-steps run.
				for _, ck := range []Checkpointing{{ResumeFile: files[1]}, {Dir: dir, Every: 4, ResumeLatest: true}} {
					res, errs = runCkpt(t, tc.ranks, straight, ck, 0)
					noErrs(t, errs)
					got := finalParams(t, res)
					if !slices.Equal(got, want) {
						t.Fatalf("resumed with %+v: weights differ by %.3g from 30 steps straight", ck, numtest.MaxRelDiff(got, want))
					}
					// The statistics resume too, to rounding: a checkpoint
					// keeps the ranks' average, which the resumed ranks all
					// start from; the average they end with is the straight
					// run's but for the order of its sums (before the fix of
					// issue 29, they restarted from mean 0, variance 1: off
					// by about 0.05).
					gotState := finalState(t, res)
					if len(gotState) != len(wantState) || numtest.MaxRelDiff(gotState, wantState) > 1e-7 {
						t.Fatalf("resumed with %+v: batch-norm statistics differ by %.3g from 30 steps straight", ck, numtest.MaxRelDiff(gotState, wantState))
					}
					if n := res[tc.ranks-1].Steps; n != 30 {
						t.Errorf("resumed run counts %d steps, want 30", n)
					}
				}

				// A stop request on one rank after its 13th boundary: every rank stops
				// after step 13 with a final checkpoint, and resuming ends as above.
				dir2 := t.TempDir()
				_, errs = runCkpt(t, tc.ranks, straight, Checkpointing{Dir: dir2, Every: 100}, 13)
				for r, err := range errs {
					if cfg.Sync == SyncPS && r < cfg.PS.Servers {
						if err != nil {
							t.Fatalf("server rank %d: %v", r, err)
						}
						continue
					}
					if !errors.Is(err, ErrInterrupted) {
						t.Fatalf("rank %d: %v, want an interruption", r, err)
					}
				}
				files, _ = ckpt.List(dir2)
				if len(files) != 1 || filepath.Base(files[0]) != ckpt.Name(13) {
					t.Fatalf("after the stop: checkpoints %v, want one at step 13", files)
				}
				res, errs = runCkpt(t, tc.ranks, straight, Checkpointing{Dir: dir2, ResumeFile: files[0]}, 0)
				noErrs(t, errs)
				if got := finalParams(t, res); !slices.Equal(got, want) {
					t.Fatalf("resumed from the stop at 13: weights differ by %.3g from 30 steps straight", numtest.MaxRelDiff(got, want))
				}
			})
		}
	}
}

// TestCheckpointRefused: a truncated, corrupted, other-model or
// other-configuration checkpoint is refused, saying why; resuming from the
// folder falls back to the previous valid one.
func TestCheckpointRefused(t *testing.T) {
	cfg := synthCfg()
	cfg.MaxSteps = 9
	dir := t.TempDir()
	_, errs := runCkpt(t, 2, cfg, Checkpointing{Dir: dir, Every: 3, Keep: 5}, 0)
	noErrs(t, errs)
	files, _ := ckpt.List(dir) // 9 (the last step's), 6, 3
	if len(files) != 3 {
		t.Fatalf("checkpoints %v", files)
	}
	good, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	resumeFile := func(t *testing.T, c Config, path string) error {
		t.Helper()
		_, errs := runCkpt(t, 2, c, Checkpointing{ResumeFile: path}, 0)
		if errs[0] == nil {
			t.Fatalf("resumed from %s", path)
		}
		if !errors.Is(errs[0], ErrCheckpoint) || !errors.Is(errs[1], ErrCheckpoint) {
			t.Fatalf("errors %v / %v, want ErrCheckpoint on both ranks", errs[0], errs[1])
		}
		return errs[0]
	}
	for _, tc := range []struct {
		name, want string
		edit       func([]byte) []byte
	}{
		{"truncated", "truncated", func(b []byte) []byte { return b[:len(b)-100] }},
		{"bit-flip", "corrupted", func(b []byte) []byte { b = slices.Clone(b); b[len(b)/2] ^= 4; return b }},
		{"empty", "truncated", func([]byte) []byte { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "bad.npz")
			if err := os.WriteFile(p, tc.edit(good), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := resumeFile(t, cfg, p); !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
	t.Run("other-model", func(t *testing.T) {
		c := cfg
		c.Hidden = []int{16, 7}
		if err := resumeFile(t, c, files[0]); !strings.Contains(err.Error(), "another model") {
			t.Errorf("error %q does not say it is another model", err)
		}
	})
	t.Run("other-config", func(t *testing.T) {
		c := cfg
		c.Opt.LR = 0.2
		if err := resumeFile(t, c, files[0]); !strings.Contains(err.Error(), "configuration hash") {
			t.Errorf("error %q does not name the configuration", err)
		}
	})
	t.Run("fallback", func(t *testing.T) {
		// The newest is corrupted: resuming the folder takes step 6's and says so.
		bad := slices.Clone(good)
		bad[len(bad)/3] ^= 1
		if err := os.WriteFile(files[0], bad, 0o644); err != nil {
			t.Fatal(err)
		}
		more := cfg
		more.MaxSteps = 12
		var out strings.Builder
		res, errs := runOut(t, 2, more, Checkpointing{Dir: dir, ResumeLatest: true}, &out)
		noErrs(t, errs)
		if s := out.String(); !strings.Contains(s, "refusing "+files[0]) || !strings.Contains(s, "falling back") ||
			!strings.Contains(s, "from "+files[1]) {
			t.Errorf("output does not tell the fallback:\n%s", s)
		}
		want := mustRun(t, 2, more)[0].Params
		if !slices.Equal(res[0].Params, want) {
			t.Error("resumed from step 6: weights differ from 12 steps straight")
		}
	})
}

// TestCheckpointNoneToResume: --resume on an empty folder starts fresh.
func TestCheckpointNoneToResume(t *testing.T) {
	cfg := synthCfg()
	cfg.MaxSteps = 5
	res, errs := runCkpt(t, 2, cfg, Checkpointing{Dir: t.TempDir(), ResumeLatest: true}, 0)
	noErrs(t, errs)
	if want := mustRun(t, 2, cfg)[0].Params; !slices.Equal(res[0].Params, want) {
		t.Error("a fresh start through --resume differs from a plain run")
	}
}

// TestCheckpointAsyncResidueRefused: sigmod residues are checkpointed only
// under bsp.
func TestCheckpointAsyncResidueRefused(t *testing.T) {
	cfg := synthCfg()
	cfg.Sync, cfg.PS.Consistency, cfg.PS.Filters = SyncPS, ps.ASP, "sigmod:0.01"
	_, errs := runCkpt(t, 3, cfg, Checkpointing{Dir: t.TempDir(), Every: 2}, 0)
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "only under bsp") {
		t.Fatalf("error %v", errs[0])
	}
}

// TestStopDPSGD: under dpsgd a stop request of one rank stops every rank
// after the same step (the one-float vote); checkpoints on a step schedule
// are refused under adpsgd, which has no common step boundary (it writes
// them at its synchronisation points: TestADPSGDCheckpoints).
func TestStopDPSGD(t *testing.T) {
	cfg := gossipCfg(SyncDPSGD, gossip.Ring)
	res, errs := runCkpt(t, 3, cfg, Checkpointing{}, 4)
	for r, err := range errs {
		if !errors.Is(err, ErrInterrupted) || res[r] == nil || res[r].Steps != 4 {
			t.Fatalf("rank %d: %v (result %v), want an interruption after 4 steps", r, err, res[r])
		}
	}
	_, errs = runWorldCkpt(t, 3, gossipCfg(SyncADPSGD, gossip.Ring), Checkpointing{Dir: t.TempDir(), Every: 2})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "writes checkpoints at its synchronisation points") {
		t.Fatalf("checkpoints every 2 steps under adpsgd: %v", errs[0])
	}
}

// TestStopEvaluatesStoppedWeights: after a stop mid-epoch the result's
// test accuracy (the done: line's) is that of the weights training stopped
// with, not the last epoch's evaluation (issue 17: it repeated it).
func TestStopEvaluatesStoppedWeights(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ranks int
		cfg   func(*Config)
	}{
		{"allreduce", 2, func(c *Config) {}},
		{"dpsgd", 3, func(c *Config) { c.Sync, c.Topology = SyncDPSGD, gossip.Ring }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := synthCfg()
			cfg.Epochs, cfg.EvalEvery, cfg.Opt.LR = 3, 1, 0.5
			tc.cfg(&cfg)
			// Epoch 1 is evaluated; the stop comes 3 steps into epoch 2.
			perEpoch := (cfg.Data.Samples/tc.ranks + cfg.Batch - 1) / cfg.Batch
			res, errs := runCkpt(t, tc.ranks, cfg, Checkpointing{}, perEpoch+3)
			for r, err := range errs {
				if !errors.Is(err, ErrInterrupted) {
					t.Fatalf("rank %d: %v, want an interruption", r, err)
				}
			}
			r0 := res[0]
			if len(r0.Epochs) == 0 || r0.Epochs[0].TestAcc == nil {
				t.Fatalf("epoch 1 was not evaluated: %+v", r0.Epochs)
			}
			_, test, err := cfg.Data.Open(cfg.Seed)
			if err != nil {
				t.Fatal(err)
			}
			var want EvalResult
			noErrs(t, local.NewWorld(1).Run(func(c *local.Comm) error {
				want, err = Evaluate(c, cpu.New(), r0.Arch, model.State{Params: r0.Params}, test, 1000)
				return err
			}))
			if r0.TestAcc != want.Accuracy {
				t.Errorf("test accuracy %v, want %v (the stopped weights'); epoch 1's was %v", r0.TestAcc, want.Accuracy, *r0.Epochs[0].TestAcc)
			}
		})
	}
}

// TestStopFromServerAndAsync: a signal to a parameter server stops every
// worker (a stop note; under bsp at one agreed step, with a checkpoint
// that resumes bit for bit); under asp a signalled worker's note stops the
// other workers too.
func TestStopFromServerAndAsync(t *testing.T) {
	cfg := synthCfg()
	cfg.Sync, cfg.PS.Servers, cfg.Epochs = SyncPS, 1, 3
	straight := cfg
	straight.MaxSteps = 30
	res, errs := runCkpt(t, 4, straight, Checkpointing{}, 0)
	noErrs(t, errs)
	want := res[1].Params

	dir := t.TempDir()
	res, errs = runCkptStop(t, 4, straight, Checkpointing{Dir: dir}, 0, 20)
	if errs[0] != nil {
		t.Fatalf("server: %v", errs[0])
	}
	for r := 1; r < 4; r++ {
		if !errors.Is(errs[r], ErrInterrupted) || res[r].Steps != res[1].Steps {
			t.Fatalf("worker rank %d: %v after %d steps (rank 1: %d), want an interruption at the same step", r, errs[r], res[r].Steps, res[1].Steps)
		}
	}
	files, _ := ckpt.List(dir)
	if len(files) != 1 || res[1].Steps >= 30 {
		t.Fatalf("checkpoints %v after stopping at step %d", files, res[1].Steps)
	}
	res, errs = runCkpt(t, 4, straight, Checkpointing{Dir: dir, ResumeLatest: true}, 0)
	noErrs(t, errs)
	if !slices.Equal(res[1].Params, want) {
		t.Fatal("resumed after a server's stop: weights differ from the straight run")
	}

	// 900 steps each: the others cannot finish before rank 3's note.
	async := cfg
	async.PS.Consistency, async.Epochs = ps.ASP, 100
	_, errs = runCkptStop(t, 4, async, Checkpointing{}, 3, 2)
	for r := 1; r < 4; r++ {
		if !errors.Is(errs[r], ErrInterrupted) {
			t.Fatalf("asp worker rank %d: %v, want an interruption", r, errs[r])
		}
	}
}

// TestNumpyReadsCheckpointFile: numpy loads a checkpoint as it is: the
// weights equal those of the --save file of the same state, array by
// array; the optimizer state and meta.json are there.
func TestNumpyReadsCheckpointFile(t *testing.T) {
	py := ""
	for _, cand := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(cand, "-c", "import numpy").Run() == nil {
			py = cand
			break
		}
	}
	if py == "" {
		t.Skip("no python3 with numpy (make deps installs Debian's python3-numpy)")
	}
	arch, _ := model.NewArch(6, []int{5}, 3, model.SoftmaxCE)
	p := arch.InitParams(4)
	opt := make([]float32, len(p))
	for i := range opt {
		opt[i] = float32(i) / 7
	}
	dir := t.TempDir()
	c := &ckpt.File{Meta: ckpt.Meta{Format: ckpt.Format, Version: ckpt.Version, Arch: arch,
		Position: Position{Epoch: 2, Step: 3, Steps: 17}}, State: model.State{Params: p, Opt: opt}}
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	ck, save := filepath.Join(dir, "c.npz"), filepath.Join(dir, "w.npz")
	if err := ckpt.WriteAtomic(ck, b); err != nil {
		t.Fatal(err)
	}
	if err := model.SaveNPZ(save, arch, p); err != nil {
		t.Fatal(err)
	}
	script := `
import sys, json, numpy as np
c, w = np.load(sys.argv[1]), np.load(sys.argv[2])
for k in w.files:
    assert c[k].dtype == np.float32 and np.array_equal(c[k], w[k]), k
assert c["optimizer"].shape == (int(sys.argv[3]),) and c["optimizer"][7] == np.float32(1)
print(json.loads(bytes(c["meta.json"]))["position"]["steps"], len(w.files))
`
	out, err := exec.Command(py, "-c", script, ck, save, strconv.Itoa(len(p))).CombinedOutput()
	if err != nil {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "17 4" {
		t.Fatalf("numpy printed %q, want steps 17 and 4 arrays", got)
	}
}

// TestCheckpointAsyncResumes: under ssp, asp and dssp a checkpoint resumes
// (servers at the reporting worker's clock, every worker at its position)
// and training runs to its end; the weights are not compared (asynchronous
// runs differ run to run).
func TestCheckpointAsyncResumes(t *testing.T) {
	for _, c := range []ps.Consistency{ps.SSP, ps.ASP, ps.DSSP} {
		t.Run(c.String(), func(t *testing.T) {
			cfg := synthCfg()
			cfg.Sync, cfg.PS.Consistency, cfg.Epochs = SyncPS, c, 3
			dir := t.TempDir()
			first := cfg
			first.MaxSteps = 12
			_, errs := runCkpt(t, 3, first, Checkpointing{Dir: dir, Every: 5}, 0)
			noErrs(t, errs)
			res, errs := runCkpt(t, 3, cfg, Checkpointing{Dir: dir, ResumeLatest: true}, 0)
			noErrs(t, errs)
			if n := res[1].Steps; n != 3*13 {
				t.Errorf("resumed run ends after %d steps, want %d", n, 3*13)
			}
		})
	}
}

// TestCheckpointNames: only ckpt-sNNN.npz names a checkpoint (a first
// version of checkpointSteps also took "123.npz", which listing, pruning
// and leftover removal would then have counted as one).
func TestCheckpointNames(t *testing.T) {
	for name, want := range map[string]int{"ckpt-s000000469.npz": 469, "ckpt-s1.npz": 1} {
		if got, ok := ckpt.Steps(name); !ok || got != want {
			t.Errorf("%s: %d, %v; want %d", name, got, ok, want)
		}
	}
	for _, name := range []string{"123.npz", "ckpt-s12", "ckpt-sx.npz", "w.npz", "ckpt-s.npz", ".ckpt-s1.npz.tmp-3"} {
		if _, ok := ckpt.Steps(name); ok {
			t.Errorf("%s taken for a checkpoint", name)
		}
	}
}

// TestKeepCountsValidOnly (issue 29): a file with a checkpoint's name that
// is none — empty, or a link to /dev/zero — newer than every real one is
// not counted among the --keep newest: the real ones stay, and a later
// resume falls back to them.
func TestKeepCountsValidOnly(t *testing.T) {
	for _, bogus := range []string{"empty", "devzero"} {
		t.Run(bogus, func(t *testing.T) {
			cfg := synthCfg()
			cfg.MaxSteps = 6
			dir := t.TempDir()
			_, errs := runCkpt(t, 2, cfg, Checkpointing{Dir: dir, Every: 2, Keep: 1}, 0)
			noErrs(t, errs)
			fake := filepath.Join(dir, ckpt.Name(999999999))
			switch bogus {
			case "empty":
				if err := os.WriteFile(fake, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			case "devzero":
				if err := os.Symlink("/dev/zero", fake); err != nil {
					t.Fatal(err)
				}
			}
			more := cfg
			more.MaxSteps = 10
			_, errs = runCkpt(t, 2, more, Checkpointing{Dir: dir, Every: 2, Keep: 1, ResumeLatest: true}, 0)
			noErrs(t, errs)
			files, _ := ckpt.List(dir)
			if len(files) != 2 || files[0] != fake || filepath.Base(files[1]) != ckpt.Name(10) {
				t.Fatalf("after --keep 1: %v, want the bogus file left alone and step 10's checkpoint", files)
			}
			// And the next resume finds step 10's.
			again := cfg
			again.MaxSteps = 12
			res, errs := runCkpt(t, 2, again, Checkpointing{Dir: dir, Every: 100, ResumeLatest: true}, 0)
			noErrs(t, errs)
			if res[0].Steps != 12 {
				t.Errorf("resumed run counts %d steps, want 12 (from step 10's checkpoint)", res[0].Steps)
			}
		})
	}
}

// TestCheckpointDirLocked (issue 29): a second job in a folder another
// holds is refused, naming the holder, and leaves the holder's
// checkpoints alone; once the holder is done, a job may use the folder.
func TestCheckpointDirLocked(t *testing.T) {
	defer func(w time.Duration) { ckpt.LockWait = w }(ckpt.LockWait)
	ckpt.LockWait = 300 * time.Millisecond
	dir := t.TempDir()
	cfg := synthCfg()
	cfg.MaxSteps = 4
	_, errs := runCkpt(t, 2, cfg, Checkpointing{Dir: dir, Every: 2}, 0)
	noErrs(t, errs)
	before, _ := ckpt.List(dir)
	unlock, err := ckpt.LockDir(dir) // as another job would
	if err != nil {
		t.Fatal(err)
	}
	_, errs = runCkpt(t, 2, cfg, Checkpointing{Dir: dir, Every: 2, ResumeLatest: true}, 0)
	for r, err := range errs {
		var ce *ConfigError
		switch {
		case r == cfg.ReportingRank() && (!errors.As(err, &ce) || !strings.Contains(err.Error(), "is in use by dml (pid ")):
			t.Errorf("rank %d (the writer): %v, want a ConfigError naming the holder", r, err)
		case err == nil:
			t.Errorf("rank %d went on", r)
		}
	}
	if after, _ := ckpt.List(dir); !slices.Equal(after, before) {
		t.Errorf("the refused job changed the folder: %v, was %v", after, before)
	}
	unlock()
	_, errs = runCkpt(t, 2, cfg, Checkpointing{Dir: dir, Every: 2, ResumeLatest: true}, 0)
	noErrs(t, errs)
}
