package main

import (
	"encoding/csv"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dml-project/dml/bench/sweep"
	"github.com/dml-project/dml/trainer"
)

// TestBenchSweepUsage: a bad sweep is refused before anything runs (exit
// 2, no output folder).
func TestBenchSweepUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sync", "allreduce,ps-nope"}, `unknown strategy "ps-nope"`},
		{[]string{"--sync", "bsp"}, "did you mean ps-bsp"},
		{[]string{"--model", "cnn"}, `unknown model "cnn"`},
		{[]string{"--ranks", "1,0"}, `"0" is not a positive integer`},
		{[]string{"--launcher", "no-such-launcher -x"}, `--launcher "no-such-launcher"`},
		{[]string{"--launcher", ""}, "--launcher is empty"},
		{[]string{"--train-args", "--lr -1"}, "--lr"},
		{[]string{"--train-args", "--bogus"}, "bogus"},
		{[]string{"--data", "imagenet"}, "imagenet"},
		{[]string{"--hosts", "2", "--cluster-dir", "/no/such/dir"}, "no test cluster scripts"},
		{[]string{"--link", "1gbit"}, "--link needs --hosts"},
		{[]string{"--hosts", "2", "--launcher", "mpirun"}, "not both"},
		{[]string{"--config", "/no/such/sweep.yaml"}, "--config"},
		// What the sweep sets itself is refused in --train-args (an MLP on
		// a parameter server was labelled softmax/allreduce).
		{[]string{"--sync", "allreduce", "--model", "softmax", "--train-args", "--sync ps --model mlp"}, "--train-args sets --model, which the sweep sets itself: give the sweep's --model instead"},
		{[]string{"--train-args", "--hidden 8"}, "--train-args sets --hidden"},
		{[]string{"--train-args", "--metrics m.jsonl"}, "--train-args sets --metrics, which the sweep sets itself: the sweep sets it for every run"},
		// An allreduce mode in --train-args: the row would say allreduce
		// for a local-SGD or compressed run (issue 29).
		{[]string{"--train-args", "--local-steps 4"}, "--train-args sets --local-steps, which the sweep sets itself: give the sweep's --sync mode (allreduce+local4) instead"},
		{[]string{"--train-args", "--compress fp16"}, "--train-args sets --compress"},
		// A model that cannot take the data: refused before any run.
		{[]string{"--model", "logreg", "--data", "fashion-mnist"}, "logreg_allreduce_b32_n1: --model logreg is binary, but the data has 10 classes"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		r := dml(t, 0, append([]string{"bench", "sweep", "--out", out}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: the output folder was created before the sweep was checked", tc.args)
		}
	}
	if r := dml(t, 1, "bench", "sweep", "--out", filepath.Join(t.TempDir(), "out")); r.code != 2 || !strings.Contains(r.stderr, "without mpirun") {
		t.Errorf("under mpirun: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestSweepTakesEveryTrainFlag: every flag of dml train that the sweep
// does not set itself passes through --train-args (--checkpoint-dir,
// --keep and --resume were "flag provided but not defined"), and logreg
// on synthetic data is planned with 2 classes (every run failed on 10).
func TestSweepTakesEveryTrainFlag(t *testing.T) {
	cfg := trainer.DefaultConfig()
	var cf commonFlags
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	registerAllTrainFlags(fs, &cfg, &cf, io.Discard)
	spec := sweep.DefaultSpec()
	spec.Launcher = []string{"true"}
	spec.Models = []string{"logreg"}
	runs, err := sweep.Plan(spec)
	if err != nil {
		t.Fatal(err)
	}
	owned := map[string]bool{}
	for _, a := range runs[0].Args {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			owned[name] = true
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if _, sets := sweepSets[f.Name]; sets || owned[f.Name] {
			return
		}
		value := f.DefValue
		if value == "" {
			value = "x"
		}
		switch f.Name {
		case "resume", "checkpoint-dir", "save":
			value = filepath.Join(t.TempDir(), "x")
		case "checkpoint-every":
			value = "1e"
		case "straggle":
			value = "0:2"
		case "filters":
			value = "fp16"
		case "loss-scale":
			value = "off" // dynamic: refused by the sweep's ps runs, which cannot agree a skip
		case "augment":
			value = "crop"
		case "lr-schedule":
			value = "cosine"
		case "model-file":
			value = filepath.Join(t.TempDir(), "net.yaml")
			os.WriteFile(value, []byte("layers:\n  - {kind: flatten}\n  - {kind: linear, name: fc, out: 2}\n"), 0o644)
		}
		s := spec
		s.TrainArgs = []string{"--" + f.Name + "=" + value}
		if f.Name == "checkpoint-every" {
			s.TrainArgs = append(s.TrainArgs, "--checkpoint-dir", t.TempDir())
		}
		if _, err := planSweep(s); err != nil {
			t.Errorf("--train-args --%s=%s: %v", f.Name, value, err)
		}
	})
	if _, err := planSweep(spec); err != nil || !strings.Contains(strings.Join(runs[0].Args, " "), "--classes 2 ") {
		t.Errorf("logreg on synthetic data: %v, args %v; want it planned with --classes 2", err, runs[0].Args)
	}
	// …and the sweep says so when the other models use another count.
	spec.Models = []string{"mlp", "logreg"}
	if note := binaryClassesNote(spec); !strings.Contains(note, "logreg is binary, so its runs use --classes 2; the other models use --classes 10") {
		t.Errorf("note %q", note)
	}
	spec.Models = []string{"mlp"}
	if note := binaryClassesNote(spec); note != "" {
		t.Errorf("no logreg, note %q", note)
	}
}

// TestBenchSweepRuns runs a small real sweep under mpirun: 1 and 2 ranks ×
// allreduce and a parameter server (skipped on 1 rank), and checks the
// results, a run's per-rank reports and the plots.
func TestBenchSweepRuns(t *testing.T) {
	out := t.TempDir()
	cfg := filepath.Join(out, "sweep.yaml")
	os.WriteFile(cfg, []byte("sync: [allreduce-ring, ps-bsp]\nmodel: [softmax]\n"), 0o644)
	r := dml(t, 0, "bench", "sweep", "--config", cfg, "--ranks", "1,2", "--batch", "16", "--epochs", "1",
		"--samples", "2000", "--features", "16", "--classes", "4", "--target", "0.5", "--run-timeout", "60s",
		"--launcher", "mpirun --oversubscribe", "--out", out)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"allreduce-ring", "ps-bsp", "skipped", "samples/s", "allreduce-ring@1"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, r.stdout)
		}
	}
	f, err := os.Open(filepath.Join(out, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil || len(recs) != 5 {
		t.Fatalf("results.csv: %d records, %v", len(recs), err)
	}
	col := map[string]int{}
	for i, name := range recs[0] {
		col[name] = i
	}
	status := map[string]string{}
	for _, rec := range recs[1:] {
		status[rec[col["strategy"]]+"@"+rec[col["ranks"]]] = rec[col["status"]]
		if rec[col["status"]] == "ok" && (rec[col["samples_per_sec"]] == "" || rec[col["cpu_util_mean"]] == "" || rec[col["final_acc"]] == "") {
			t.Errorf("an ok row without figures: %v", rec)
		}
	}
	want := map[string]string{"allreduce-ring@1": "ok", "ps-bsp@1": "skipped", "allreduce-ring@2": "ok", "ps-bsp@2": "ok"}
	for k, v := range want {
		if status[k] != v {
			t.Errorf("%s: %q, want %q (all: %v)", k, status[k], v, status)
		}
	}
	// Each rank of a 2-rank run reported its CPU time and bytes sent.
	for rank := range 2 {
		b, err := os.ReadFile(filepath.Join(out, "runs", "softmax_allreduce-ring_b16_n2", "report.rank-"+string(rune('0'+rank))+".json"))
		var rep struct {
			Size      int     `json:"size"`
			CPU       float64 `json:"cpu_util"`
			BytesSent int64   `json:"bytes_sent"`
		}
		if err != nil || json.Unmarshal(b, &rep) != nil || rep.Size != 2 || rep.CPU <= 0 || rep.BytesSent <= 0 {
			t.Errorf("rank %d report: %s %v", rank, b, err)
		}
	}
	// --replot draws the same from results.jsonl alone.
	os.Remove(filepath.Join(out, "throughput.png"))
	if rp := dml(t, 0, "bench", "sweep", "--replot", "--out", out); rp.code != 0 || !strings.Contains(rp.stdout, "allreduce-ring@1") {
		t.Errorf("--replot: exit %d\n%s%s", rp.code, rp.stdout, rp.stderr)
	}
	for _, p := range []string{"throughput.png", "throughput.svg", "breakdown.png", "accuracy.svg", "efficiency-weak.png", "efficiency-strong.svg", "results.jsonl"} {
		if st, err := os.Stat(filepath.Join(out, p)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// TestBenchConsistencyOutputsChecked: an unwritable --save is refused
// before any training, in one line (it trained first, then failed with
// a Go struct in the message).
func TestBenchConsistencyOutputsChecked(t *testing.T) {
	dir := t.TempDir()
	r := dml(t, 0, "bench", "consistency", "--models", "allreduce", "--save", dir)
	if r.code != 2 || r.stdout != "" || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 ||
		!strings.Contains(r.stderr, "bench consistency: --save: "+dir+" is a folder, not a regular file") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line before any training", r.code, r.stdout, r.stderr)
	}
}

// TestBenchConsistencySettlesAsTrain: bench consistency takes every flag
// of dml train that shapes the job (not train's own outputs, progress bar
// or checkpoints) and settles them as dml train does: the same command
// line gives the same Config (--classes with idx data, the stall timeout,
// --overlap auto resolved by the same rule; bench consistency ignored
// --classes and never resolved --overlap auto before).
func TestBenchConsistencySettlesAsTrain(t *testing.T) {
	trainOnly := map[string]bool{"progress": true, "run-report": true, "checkpoint-dir": true, "checkpoint-every": true, "keep": true, "resume": true, "emergency-checkpoint": true}
	newTrain := func() (*flag.FlagSet, *trainer.Config, *commonFlags, *overlapFlag) {
		cfg, cf := trainer.DefaultConfig(), &commonFlags{}
		fs := flag.NewFlagSet("train", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return fs, &cfg, cf, registerAllTrainFlags(fs, &cfg, cf, io.Discard).overlap
	}
	newBench := func() (*flag.FlagSet, *trainer.Config, *commonFlags, *overlapFlag) {
		cfg, cf := trainer.DefaultConfig(), &commonFlags{}
		fs := flag.NewFlagSet("bench consistency", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return fs, &cfg, cf, registerConsistencyFlags(fs, &cfg, cf, io.Discard).overlap
	}
	tfs, _, _, _ := newTrain()
	bfs, _, _, _ := newBench()
	tfs.VisitAll(func(f *flag.Flag) {
		if bfs.Lookup(f.Name) == nil && !trainOnly[f.Name] {
			t.Errorf("bench consistency lacks dml train's --%s", f.Name)
		}
	})
	for _, args := range [][]string{
		{"--data", "idx", "--train", "a,b", "--classes", "7", "--overlap", "auto", "--timeout", "42s", "--hidden", "16"},
		{"--data", "synthetic", "--samples", "100", "--overlap", "auto", "--blas-threads", "2", "--stall-warn", "3s"},
		{"--model", "softmax", "--overlap", "false", "--optimizer", "adagrad", "--lr", "0.2", "--straggle", "1:3"},
	} {
		var got [2]trainer.Config
		for i, mk := range []func() (*flag.FlagSet, *trainer.Config, *commonFlags, *overlapFlag){newTrain, newBench} {
			fs, cfg, cf, ov := mk()
			if err := fs.Parse(args); err != nil {
				t.Fatalf("%s %v: %v", fs.Name(), args, err)
			}
			if err := settleConfig(fs.Name(), fs, cfg, cf, ov); err != nil {
				t.Fatalf("%s %v: %v", fs.Name(), args, err)
			}
			got[i] = *cfg
		}
		// Both start from trainer.DefaultConfig (bench consistency's own
		// job is a matter of defaults, set before its flags are parsed).
		if !reflect.DeepEqual(got[0], got[1]) {
			t.Errorf("%v: train settles to %+v, bench consistency to %+v", args, got[0], got[1])
		}
		if slices.Contains(args, "--classes") && got[1].Data.ExpectClasses != 7 {
			t.Errorf("%v: bench consistency expects %d classes, want 7", args, got[1].Data.ExpectClasses)
		}
	}
}
