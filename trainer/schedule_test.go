package trainer

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/trainer/engine"
	"github.com/dml-project/dml/trainer/internal/numtest"
)

// TestLRScheduleRefused: bad schedules, warm-ups and clipping are one
// error naming the setting.
func TestLRScheduleRefused(t *testing.T) {
	for _, tc := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.LRSchedule = "linear" }, `"linear": unknown schedule`},
		{func(c *Config) { c.LRSchedule = "step:3:0.1" }, "milestone 3 is not before the last epoch (3)"},
		{func(c *Config) { c.LRSchedule = "step:2,1:0.1" }, "milestones must increase"},
		{func(c *Config) { c.LRSchedule = "step:1:0" }, "gamma"},
		{func(c *Config) { c.LRSchedule = "step:x:0.5" }, "is not an epoch"},
		{func(c *Config) { c.LRSchedule = "step:1" }, "want step:E1,E2,…:GAMMA"},
		{func(c *Config) { c.WarmupEpochs = 4 }, "want 0 to the epochs (3)"},
		{func(c *Config) { c.WarmupEpochs = -1 }, "want 0 to the epochs"},
		{func(c *Config) { c.ClipNorm = -1 }, "must not be negative"},
	} {
		c := DefaultConfig()
		c.Epochs = 3
		tc.set(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want %q", err, tc.want)
		}
	}
}

// TestLRScheduleTrains: with a warm-up and a step schedule every step's
// rate is in --metrics as planned; the ps servers, which compute each
// round's rate themselves, train bit for bit as allreduce does (with the
// default momentum, and with LARS, whose one server takes a trust ratio
// per tensor as the allreduce ranks do); and the rates change what is
// trained.
func TestLRScheduleTrains(t *testing.T) {
	for _, k := range []optim.Kind{optim.Momentum, optim.LARS} {
		t.Run(k.String(), func(t *testing.T) { testLRScheduleTrains(t, k) })
	}
}

func testLRScheduleTrains(t *testing.T, k optim.Kind) {
	cfg := synthCfg()
	cfg.Opt.Kind = k
	cfg.Epochs, cfg.LRSchedule, cfg.WarmupEpochs = 3, "step:2:0.5", 0.5
	ar := cfg
	ar.Metrics = filepath.Join(t.TempDir(), "m.jsonl")
	res, errs := runWorld(t, 2, ar, nil)
	noErrs(t, errs)
	b, err := os.ReadFile(ar.Metrics)
	if err != nil {
		t.Fatal(err)
	}
	plan := engine.NewLRPlan(cfg, 2)
	steps := 13 // 203 samples, 2 ranks × 8
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct {
			Epoch int       `json:"epoch"`
			LR    []float32 `json:"lr"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		if len(e.LR) != steps {
			t.Fatalf("epoch %d: %d rates, want %d", e.Epoch, len(e.LR), steps)
		}
		for k, lr := range e.LR {
			if want := plan.At(engine.EpochAt(i+1, k, steps)); lr != want {
				t.Fatalf("epoch %d step %d: rate %v, want %v", e.Epoch, k, lr, want)
			}
		}
	}
	want := finalParams(t, res)
	ps := cfg
	ps.Sync, ps.PS.Servers = SyncPS, 1
	res, errs = runWorld(t, 3, ps, nil)
	noErrs(t, errs)
	if got := res[1].Params; !slices.Equal(got, want) {
		t.Errorf("ps bsp with the schedule: weights differ from allreduce's by %.3g", numtest.MaxRelDiff(got, want))
	}
	c3 := synthCfg3()
	c3.Opt.Kind = k
	res, errs = runWorld(t, 2, c3, nil)
	noErrs(t, errs)
	if slices.Equal(finalParams(t, res), want) {
		t.Error("the schedule changed nothing")
	}
}

// synthCfg3 is synthCfg for 3 epochs at a constant rate.
func synthCfg3() Config { c := synthCfg(); c.Epochs = 3; return c }

// TestClipNorm: one SGD step clipped to a norm far below the gradient's
// moves the weights by lr × that norm; unclipped by more.
func TestClipNorm(t *testing.T) {
	cfg := synthCfg()
	cfg.Opt.Kind, cfg.MaxSteps = optim.SGD, 1
	start, errs := runWorld(t, 2, func() Config { c := cfg; c.MaxSteps = 0; return c }(), nil)
	noErrs(t, errs)
	w0 := finalParams(t, start)
	for _, clip := range []float32{0, 1e-3} {
		c := cfg
		c.ClipNorm = clip
		res, errs := runWorld(t, 2, c, nil)
		noErrs(t, errs)
		var d2 float64
		for i, w := range finalParams(t, res) {
			d := float64(w - w0[i])
			d2 += d * d
		}
		moved, bound := math.Sqrt(d2), float64(cfg.Opt.LR)*1e-3
		switch {
		case clip > 0 && math.Abs(moved-bound) > 1e-3*bound:
			t.Errorf("clipped to %v: the step moved the weights by %.6g, want lr × clip = %.6g", clip, moved, bound)
		case clip == 0 && moved < 10*bound:
			t.Errorf("unclipped: moved by %.6g, want far more than %.6g (pick a smaller clip)", moved, bound)
		}
	}
}
