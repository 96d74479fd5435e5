package sweep

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/floats/scalar"

	"github.com/dml-project/dml/trainer"
)

func ptr(x float64) *float64 { return &x }

func near(a, b float64) bool { return scalar.EqualWithinAbsOrRel(a, b, 1e-12, 1e-9) }

func TestAggregate(t *testing.T) {
	run := Run{ID: "x", Model: Model{Name: "mlp"}, Strategy: Strategy{Name: "ps-bsp"}, Ranks: 3, Batch: 8}
	epochs := []trainer.EpochStats{
		{Epoch: 1, Steps: 100, SamplesPerSec: 1000, CommFraction: 0.5, TrainSec: 2, WallSec: 2.5, TestAcc: ptr(0.7),
			PSStats: &trainer.PSStats{WaitSec: 0.6}},
		{Epoch: 2, Steps: 100, SamplesPerSec: 3000, CommFraction: 0.25, TrainSec: 1, WallSec: 1.5, TestAcc: ptr(0.85),
			PSStats: &trainer.PSStats{WaitSec: 0.2}},
		{Epoch: 3, Steps: 100, SamplesPerSec: 3000, CommFraction: 0.25, TrainSec: 1, WallSec: 1.5, TestAcc: ptr(0.8),
			PSStats: &trainer.PSStats{WaitSec: 0.2}},
	}
	reports := []RankReport{
		{Rank: 0, CPUUtil: 0.5, BytesSent: 3000},
		{Rank: 1, CPUUtil: 1.0, BytesSent: 1500, Samples: 14000},
		{Rank: 2, CPUUtil: 0.9, BytesSent: 1500, Samples: 14000},
	}
	r := Aggregate(NewRow(run, OK), epochs, reports, 0.8)
	// Training time 4 s over 300 steps; comm 1 + 0.25 + 0.25 = 1.5 s; wait 1 s.
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"StepMs", r.StepMs, 4000.0 / 300},
		{"CommMs", r.CommMs, 1500.0 / 300},
		{"ComputeMs", r.ComputeMs, 2500.0 / 300},
		{"WaitMs", r.WaitMs, 1000.0 / 300},
		{"SamplesPerSec", r.SamplesPerSec, 14000.0 / 4}, // the job's samples, not the worker's 8000
		{"BytesPerStep", r.BytesPerStep, 6000.0 / 300},
		{"CPUUtilMean", r.CPUUtilMean, 2.4 / 3},
		{"TimeToTargetSec", r.TimeToTargetSec, 4}, // epoch 2 ends at 2.5 + 1.5
		{"FinalAcc", r.FinalAcc, 0.8},
		{"TrainSec", r.TrainSec, 4},
		{"WallSec", r.WallSec, 5.5},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if r.Steps != 300 || r.Epochs != 3 || len(r.Accuracy) != 3 || r.Accuracy[2].WallSec != 5.5 || len(r.CPUUtil) != 3 {
		t.Errorf("got %+v", r)
	}

	// Without reports' samples the epochs' throughput counts; an allreduce
	// epoch has no wait figure; a target never reached stays NaN.
	ar := Aggregate(NewRow(run, OK), []trainer.EpochStats{{Steps: 10, SamplesPerSec: 500, CommFraction: 0.1, TrainSec: 2, WallSec: 2, TestAcc: ptr(0.5)}}, nil, 0.9)
	if !near(ar.SamplesPerSec, 500) || !math.IsNaN(ar.WaitMs) || !math.IsNaN(ar.TimeToTargetSec) || !math.IsNaN(ar.BytesPerStep) || !math.IsNaN(ar.CPUUtilMean) {
		t.Errorf("got %+v", ar)
	}
	// No epochs at all (a failed run): nothing divides by zero.
	empty := Aggregate(NewRow(run, Failed), nil, nil, 0.9)
	if !math.IsNaN(empty.StepMs) || !math.IsNaN(empty.SamplesPerSec) {
		t.Errorf("got %+v", empty)
	}
}

func TestEfficiency(t *testing.T) {
	base := Row{Strategy: "allreduce", Ranks: 1, StepMs: 2, TrainSec: 8}
	for _, tc := range []struct {
		row          Row
		weak, strong float64
	}{
		{Row{Ranks: 4, StepMs: 2, TrainSec: 2}, 1, 1},       // ideal: same step time, 4× faster
		{Row{Ranks: 4, StepMs: 4, TrainSec: 4}, 0.5, 0.5},   // steps twice as long
		{Row{Ranks: 2, StepMs: 2.5, TrainSec: 5}, 0.8, 0.8}, // 8/(2·5)
		{Row{Ranks: 2, StepMs: 0, TrainSec: 0}, math.NaN(), math.NaN()},
	} {
		tc.row.WeakEff, tc.row.StrongEff = math.NaN(), math.NaN()
		got := Efficiency(tc.row, base)
		if !(near(got.WeakEff, tc.weak) || math.IsNaN(got.WeakEff) && math.IsNaN(tc.weak)) ||
			!(near(got.StrongEff, tc.strong) || math.IsNaN(got.StrongEff) && math.IsNaN(tc.strong)) {
			t.Errorf("%+v: weak %v strong %v, want %v %v", tc.row, got.WeakEff, got.StrongEff, tc.weak, tc.strong)
		}
		if got.Baseline != "allreduce@1" {
			t.Errorf("baseline %q", got.Baseline)
		}
	}
	// A baseline with more ranks (the smallest count is not 1).
	got := Efficiency(Row{Ranks: 4, StepMs: 3, TrainSec: 3}, Row{Strategy: "ps-bsp", Ranks: 2, StepMs: 2, TrainSec: 4})
	if !near(got.StrongEff, 4*2/(3*4.0)) || !near(got.WeakEff, 2/3.0) {
		t.Errorf("got %+v", got)
	}
}

func TestFindBaseline(t *testing.T) {
	fam := map[string]string{"allreduce": "allreduce", "allreduce-ring": "allreduce", "ps-bsp": "ps-bsp", "dpsgd": "dpsgd"}
	row := func(s string, n int, st Status) Row {
		return Row{ID: s, Strategy: s, Ranks: n, Model: "m", Batch: 8, Status: st}
	}
	done := []Row{
		row("allreduce-ring", 1, OK), row("allreduce", 1, OK), row("ps-bsp", 1, Skipped), row("dpsgd", 1, Failed),
		row("allreduce", 2, OK), row("ps-bsp", 2, OK), row("dpsgd", 2, OK),
	}
	for _, tc := range []struct {
		row  Row
		want string // "" none
	}{
		{row("allreduce", 4, OK), "allreduce@1"},
		{row("allreduce-ring", 4, OK), "allreduce-ring@1"},
		{row("ps-bsp", 4, OK), "allreduce@1"}, // cannot run on 1: allreduce's 1-rank run
		{row("ps-bsp", 2, OK), "allreduce@1"},
		{row("dpsgd", 4, OK), "allreduce@1"}, // its 1-rank run failed
		{row("allreduce", 1, OK), ""},        // a 1-rank run is the baseline
	} {
		b, ok := FindBaseline(tc.row, done, fam, 1)
		got := ""
		if ok {
			got = Efficiency(tc.row, b).Baseline
		}
		if got != tc.want {
			t.Errorf("%s@%d: baseline %q, want %q", tc.row.Strategy, tc.row.Ranks, got, tc.want)
		}
	}
	// No allreduce in the sweep: the same strategy's smallest run.
	only := []Row{row("ps-bsp", 2, OK)}
	if b, ok := FindBaseline(row("ps-bsp", 4, OK), only, fam, 1); !ok || b.Ranks != 2 {
		t.Errorf("got %+v %v", b, ok)
	}
	// Another model or batch is never a baseline.
	other := row("allreduce", 1, OK)
	other.Batch = 16
	if _, ok := FindBaseline(row("allreduce", 2, OK), []Row{other}, fam, 1); ok {
		t.Error("a run with another batch size was taken as baseline")
	}
}
