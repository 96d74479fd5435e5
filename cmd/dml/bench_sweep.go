package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dml-project/dml/bench/cluster"
	"github.com/dml-project/dml/bench/sweep"
	"github.com/dml-project/dml/collectives/mpi"
	"github.com/dml-project/dml/trainer"
	"github.com/dml-project/dml/trainer/data"

	"github.com/dml-project/dml/internal/regfile"
)

const sweepSynopsis = `Usage: dml bench sweep [flags]

Runs dml train once for every combination of --ranks × --sync × --model ×
--batch, each as its own MPI job started by --launcher, and writes into
--out: results.csv and results.jsonl (a row appended as each run ends),
runs/ID/ (each run's log, --metrics and per-rank reports) and plots as PNG
and SVG. A combination that cannot run (a parameter server or adpsgd on 1
rank, a torus on a prime rank count) is skipped; a run that fails is
reported with its command and the end of its log, and the sweep goes on.

Columns: samples/s (training throughput, evaluation excluded); step time
split into compute (outside communication) and comm (in the AllReduce,
Pull/Push or the neighbour exchange, as comm_fraction measures it), of
which wait is the part the strategy reports as blocked on peers (ps wait,
dpsgd/adpsgd partner wait; - for allreduce); bytes sent per step (all
ranks); CPU per rank ((user+sys)/wall from getrusage: 1 = one busy core);
time to --target test accuracy (resolution: one epoch); final accuracy;
weak efficiency = step time at the baseline / step time (per-rank batch
fixed); strong efficiency = baseline training time × baseline ranks /
(training time × ranks) (same data and epochs). The baseline is the same
strategy at the sweep's smallest rank count, or allreduce there for a
strategy that cannot run on so few ranks.

Strategies: ` + "%s" + `; an allreduce strategy takes
modes after +: fp16, bf16, auto (--compress), ef (--error-feedback), localH
(--local-steps H), e.g. allreduce+fp16+ef, allreduce-ring+local4.
Models: dml train's --model names: mlp, mlp:HIDDEN (mlp:256,128), softmax,
logreg, sparse-logreg (with a ps strategy), lenet5, resnet20, vgg16,
resnet50, alexnet, gpt (with --train-args "--data text --train FILE"), and
file (with --train-args "--model-file net.yaml").

Example:
  dml bench sweep --ranks 1,2,4 --sync allreduce,ps-bsp,ps-asp,dpsgd \
      --model mlp:64 --data synthetic --epochs 2 --batch 32 --out sweep
  dml bench sweep --config sweep.yaml --launcher "srun --mpi=pmix -n {np}"`

// cmdBenchSweep is `dml bench sweep`. Its flags each have a key in a
// --config file (sweep.Spec's yaml names); a flag given on the command
// line wins over the file.
func cmdBenchSweep(args []string, stdout, stderr io.Writer) error {
	spec := sweep.DefaultSpec()
	fs := newFlags("bench sweep", fmt.Sprintf(sweepSynopsis, strings.Join(sweep.StrategyNames(), ", ")), stdout)
	f := registerSweepFlags(fs, &spec)
	if err := parse(fs, args); err != nil {
		return err
	}
	if f.replot {
		return replotSweep(f.out, stdout)
	}
	if pf := (profFlags{profile: f.profile, profileDir: "."}); pf.check() != nil {
		return usageErr("bench sweep: --profile %q: want cpu, mem, block, mutex or trace", f.profile)
	}
	if mpi.Launched() {
		return usageErr("bench sweep: run it without mpirun (as plain `dml bench sweep`): it launches every run itself with --launcher")
	}
	spec, err := f.settle(fs, spec)
	if err != nil {
		return err
	}
	plan, err := planSweep(spec)
	if err != nil {
		return err
	}
	if note := binaryClassesNote(spec); note != "" {
		fmt.Fprintln(stderr, note)
	}
	return f.run(spec, plan, stdout, stderr)
}

// sweepFlags are dml bench sweep's flags that are not the Spec's own.
type sweepFlags struct {
	config, out, syncs, models, trainArgs, launcher string
	hosts                                           int
	link, clusterDir, profile                       string
	timeline, replot                                bool
}

// registerSweepFlags registers the sweep's flags, the Spec's into spec.
func registerSweepFlags(fs *flag.FlagSet, spec *sweep.Spec) *sweepFlags {
	f := &sweepFlags{}
	fs.StringVar(&f.config, "config", "", "a YAML sweep file (keys: ranks, sync, model, batch, epochs, servers, data, samples, features, classes, noise, target, train_args, launcher, run_timeout); flags given win")
	fs.StringVar(&f.out, "out", "sweep", "output folder (created)")
	fs.Var(intList{&spec.Ranks}, "ranks", "rank counts, comma-separated")
	fs.StringVar(&f.syncs, "sync", strings.Join(spec.Strategies, ","), "strategies, comma-separated (see above)")
	fs.StringVar(&f.models, "model", strings.Join(spec.Models, ";"), "models, separated by ';' (an mlp's hidden sizes use commas: mlp:256,128;softmax)")
	fs.Var(intList{&spec.Batches}, "batch", "per-rank batch sizes, comma-separated")
	fs.IntVar(&spec.Epochs, "epochs", spec.Epochs, "epochs per run")
	fs.IntVar(&spec.Servers, "servers", spec.Servers, "parameter servers of the ps-* strategies")
	fs.StringVar(&spec.Data, "data", spec.Data, "dml train's --data")
	fs.IntVar(&spec.Samples, "samples", spec.Samples, "synthetic: training samples")
	fs.IntVar(&spec.Features, "features", spec.Features, "synthetic: features")
	fs.IntVar(&spec.Classes, "classes", spec.Classes, "synthetic: classes")
	fs.Float64Var(&spec.Noise, "noise", spec.Noise, "synthetic: noise")
	fs.Float64Var(&spec.Target, "target", spec.Target, "test accuracy for the time-to-target column")
	fs.StringVar(&f.trainArgs, "train-args", "", "more dml train flags for every run, e.g. \"--backend cpu --lr 0.1\"")
	fs.StringVar(&f.launcher, "launcher", strings.Join(spec.Launcher, " "), "the command that starts an MPI job; {np} in it is the rank count, else -np N is appended (e.g. \"srun --mpi=pmix -n {np}\")")
	fs.DurationVar(&spec.RunTimeout, "run-timeout", spec.RunTimeout, "kill a run (and fail it) after this long")
	fs.IntVar(&f.hosts, "hosts", 0, "run each job on a test cluster of this many hosts (network namespaces on this machine, bench/cluster/run.sh; needs root or CAP_NET_ADMIN)")
	fs.StringVar(&f.link, "link", "", "with --hosts: every host's link, RATE[,DELAY[,LOSS]] in tc's units (e.g. 1gbit,200us)")
	fs.StringVar(&f.clusterDir, "cluster-dir", filepath.Join("bench", "cluster"), "with --hosts: the folder of the test cluster's scripts")
	fs.StringVar(&f.profile, "profile", "", "profile every rank of every run: cpu, mem, block, mutex or trace (runs/ID/rank-R.cpu.pprof, …)")
	fs.BoolVar(&f.timeline, "timeline", false, "write every run's timeline to runs/ID/timeline.json (dml train --timeline)")
	fs.BoolVar(&f.replot, "replot", false, "run nothing: read --out's results.jsonl (of a sweep that ended, or died) and print its table and draw its plots again")
	return f
}

// settle makes the sweep's Spec: the --config file's, with the flags given
// winning, and the test cluster's launcher with --hosts.
func (f *sweepFlags) settle(fs *flag.FlagSet, spec sweep.Spec) (sweep.Spec, error) {
	set := given(fs)
	if f.config != "" {
		fromFile, err := sweep.LoadSpec(f.config, sweep.DefaultSpec())
		if err != nil {
			return spec, usageErr("bench sweep: %s", sweepMessage(err))
		}
		spec = overrideSpec(fromFile, spec, set)
	}
	if set["sync"] || f.config == "" {
		spec.Strategies = splitList(f.syncs, ",")
	}
	if set["model"] || f.config == "" {
		spec.Models = splitList(f.models, ";")
	}
	if set["train-args"] || f.config == "" {
		spec.TrainArgs = strings.Fields(f.trainArgs)
	}
	if set["launcher"] || f.config == "" {
		spec.Launcher = strings.Fields(f.launcher)
	}
	if f.hosts > 0 || f.link != "" {
		if set["launcher"] {
			return spec, usageErr("bench sweep: give --launcher or --hosts, not both")
		}
		l, err := clusterLauncher(f.hosts, f.link, f.clusterDir)
		if err != nil {
			return spec, err
		}
		spec.Launcher = l
	}
	return spec, nil
}

// run runs the plan's jobs, recording each into --out as it ends, then
// prints the table and draws the plots; a run that failed fails the
// sweep.
func (f *sweepFlags) run(spec sweep.Spec, plan []sweep.Planned, stdout, stderr io.Writer) error {
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench sweep: finding the dml binary: %w", err)
	}
	// The runs get absolute paths: a launcher may start ranks elsewhere
	// (another folder, another host with the same file system).
	out := f.out
	if abs, err := filepath.Abs(out); err == nil {
		out = abs
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return usageErr("bench sweep: --out: %v", err)
	}
	app, err := sweep.OpenAppender(filepath.Join(out, "results.csv"), filepath.Join(out, "results.jsonl"))
	if err != nil {
		return fmt.Errorf("bench sweep: %w", err)
	}
	defer app.Close()
	r := &sweep.Runner{Launcher: spec.Launcher, Binary: bin, Timeout: spec.RunTimeout, Target: spec.Target, Dir: out, Progress: stderr,
		Profile: f.profile, Timeline: f.timeline}
	if os.Geteuid() == 0 { // OpenMPI refuses root without these
		r.Env = []string{"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rows, err := sweep.Execute(ctx, plan, r, app)
	fmt.Fprintln(stdout)
	if werr := sweep.WriteTable(stdout, rows); err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("bench sweep: %w", err)
	}
	files, err := sweep.Plot(rows, out)
	if err != nil {
		return fmt.Errorf("bench sweep: plots: %w", err)
	}
	fmt.Fprintf(stdout, "\nwrote %s, %s and %d plots (%s …) into %s\n", "results.csv", "results.jsonl", len(files), filepath.Base(files[0]), out)
	failed := 0
	for _, row := range rows {
		if row.Status == sweep.Failed {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("bench sweep: %d of %d runs failed (their commands and logs are above and in %s)", failed, len(rows), filepath.Join(out, "results.csv"))
	}
	return nil
}

// replotSweep is --replot: the table and plots of the rows in
// out/results.jsonl.
func replotSweep(out string, stdout io.Writer) error {
	f, err := regfile.Open(filepath.Join(out, "results.jsonl"))
	if err != nil {
		return usageErr("bench sweep: --replot: %v", err)
	}
	defer f.Close()
	rows, err := sweep.ReadRowsJSON(f)
	if err != nil {
		return fmt.Errorf("bench sweep: --replot: %s: %w", f.Name(), err)
	}
	if err := sweep.WriteTable(stdout, rows); err != nil {
		return err
	}
	files, err := sweep.Plot(rows, out)
	if err != nil {
		return fmt.Errorf("bench sweep: plots: %w", err)
	}
	fmt.Fprintf(stdout, "\nwrote %d plots into %s\n", len(files), out)
	return nil
}

// overrideSpec is file with the fields whose flags were set taken from flags.
func overrideSpec(file, flags sweep.Spec, set map[string]bool) sweep.Spec {
	apply := map[string]func(){
		"ranks": func() { file.Ranks = flags.Ranks }, "batch": func() { file.Batches = flags.Batches },
		"epochs": func() { file.Epochs = flags.Epochs }, "servers": func() { file.Servers = flags.Servers },
		"data": func() { file.Data = flags.Data }, "samples": func() { file.Samples = flags.Samples },
		"features": func() { file.Features = flags.Features }, "classes": func() { file.Classes = flags.Classes },
		"noise": func() { file.Noise = flags.Noise }, "target": func() { file.Target = flags.Target },
		"run-timeout": func() { file.RunTimeout = flags.RunTimeout },
	}
	for name := range set {
		if f, ok := apply[name]; ok {
			f()
		}
	}
	return file
}

func splitList(s, sep string) []string {
	var out []string
	for _, f := range strings.Split(s, sep) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// planSweep expands spec and checks, before anything runs, every run's
// dml train flags as dml train would (a bad one is a usage error), whether
// it can run at its rank count (trainer.Config.ValidateWorld: else it is
// skipped), and that the launcher exists.
func planSweep(spec sweep.Spec) ([]sweep.Planned, error) {
	runs, err := sweep.Plan(spec)
	if err != nil {
		return nil, usageErr("bench sweep: %s", sweepMessage(err))
	}
	if _, err := exec.LookPath(spec.Launcher[0]); err != nil {
		return nil, usageErr("bench sweep: --launcher %q: %v", spec.Launcher[0], errors.Unwrap(err))
	}
	if err := checkTrainArgs(spec.TrainArgs, runs); err != nil {
		return nil, err
	}
	var plan []sweep.Planned
	for _, run := range runs {
		cfg, err := trainConfig(run.Args)
		if err != nil {
			return nil, usageErr("bench sweep: %s: %s", run.ID, message(err))
		}
		// A model that cannot take the data is refused before anything
		// runs (each run failed on it), where the data's shape is known.
		if shape, classes, ok := knownShape(cfg.Data); ok && cfg.Model != trainer.SparseLogreg {
			if _, err := trainer.BuildArch(cfg, shape, classes); err != nil {
				return nil, usageErr("bench sweep: %s: %s", run.ID, flagError(err))
			}
		}
		p := sweep.Planned{Run: run}
		if err := cfg.ValidateWorld(run.Ranks); err != nil {
			p.Skip = fmt.Sprintf("cannot run on %d rank(s): %s", run.Ranks, flagError(err))
		}
		plan = append(plan, p)
	}
	return plan, nil
}

// sweepSets names, for each dml train flag the sweep sets in every run,
// the sweep's flag that chooses it.
var sweepSets = map[string]string{
	"model": "--model", "hidden": "--model (mlp:256,128)", "sync": "--sync", "allreduce": "--sync",
	"servers": "--servers", "consistency": "--sync (ps-bsp, ps-ssp, …)", "batch": "--batch", "epochs": "--epochs",
	"data": "--data", "samples": "--samples", "features": "--features", "classes": "--classes", "noise": "--noise",
	"eval-every": "", "progress": "", "metrics": "", "run-report": "", "timeline": "--timeline", "profile": "--profile", "profile-dir": "--profile",
	// An allreduce strategy's modes are part of its label (issue 29: a
	// row said allreduce for a local-SGD run).
	"compress": "--sync mode (allreduce+fp16, +bf16, +auto)", "error-feedback": "--sync mode (allreduce+fp16+ef)",
	"local-steps": "--sync mode (allreduce+local4)",
}

// checkTrainArgs refuses --train-args that set what the sweep sets in its
// runs (the results table would label the runs by the sweep's values, not
// by what ran): the flags of the runs' own arguments, and the ones the
// runner adds.
func checkTrainArgs(trainArgs []string, runs []sweep.Run) error {
	if len(trainArgs) == 0 {
		return nil
	}
	ta, err := parseTrainArgs(trainArgs)
	if err != nil {
		return usageErr("bench sweep: --train-args: %s", message(err))
	}
	set := map[string]bool{}
	for _, r := range runs {
		for _, a := range r.Args[:len(r.Args)-len(trainArgs)] {
			if name, ok := strings.CutPrefix(a, "--"); ok {
				set[name] = true
			}
		}
	}
	ta.fs.Visit(func(f *flag.Flag) {
		use, owned := sweepSets[f.Name]
		if err != nil || !(owned || set[f.Name]) {
			return
		}
		how := "the sweep sets it for every run"
		if use != "" {
			how = "give the sweep's " + use + " instead"
		}
		err = usageErr("bench sweep: --train-args sets --%s, which the sweep sets itself: %s", f.Name, how)
	})
	return err
}

// binaryClassesNote says, for a sweep with logreg on synthetic data of
// other than 2 classes, that its logreg runs use 2 (sweep.Plan gives them
// 2: logreg is binary), so that rows of other class counts in one table
// are not read as the same task.
func binaryClassesNote(spec sweep.Spec) string {
	if spec.Data != "synthetic" || spec.Classes == 2 {
		return ""
	}
	for _, name := range spec.Models {
		if m, err := sweep.ParseModel(name); err == nil && m.Binary() {
			return fmt.Sprintf("dml: bench sweep: note: logreg is binary, so its runs use --classes 2; the other models use --classes %d", spec.Classes)
		}
	}
	return ""
}

// knownShape is the features and classes of the data d names, where they
// are known before it is read (synthetic data, Fashion-MNIST).
func knownShape(d trainer.DataConfig) (shape data.Shape, classes int, ok bool) {
	switch d.Name {
	case "synthetic":
		return data.Shape{C: d.Features, H: 1, W: 1}, d.Classes, true
	case "text":
		return d.TextShape(), data.TextVocab, true
	case "fashion-mnist":
		return data.Shape{C: 1, H: 28, W: 28}, 10, true
	case "cifar10":
		return data.Shape{C: 3, H: 32, W: 32}, data.CIFARClasses, true
	case "cifar100":
		return data.Shape{C: 3, H: 32, W: 32}, data.CIFAR100Classes, true
	case "cifar100-coarse":
		return data.Shape{C: 3, H: 32, W: 32}, data.CIFAR100CoarseClasses, true
	case "synthetic-images":
		shape := trainer.DefaultImageShape
		if d.Shape != "" {
			shape = d.Shape
		}
		sh, err := data.ParseShape(shape)
		return sh, d.Classes, err == nil
	}
	return data.Shape{}, 0, false
}

// trainConfig parses args as `dml train` does and validates the result.
func trainConfig(args []string) (trainer.Config, error) {
	cfg := trainer.DefaultConfig()
	var cf commonFlags
	fs := newFlags("train", "", io.Discard)
	registerAllTrainFlags(fs, &cfg, &cf, io.Discard)
	if err := parse(fs, resumeArgs(args)); err != nil {
		return cfg, err
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usageErr("%s", flagError(err))
	}
	return cfg, cf.check()
}

func sweepMessage(err error) string {
	return strings.TrimPrefix(err.Error(), sweep.ErrSpec.Error()+": ")
}

// clusterLauncher is --hosts N --link SPEC: a launcher that builds the
// netns test cluster of bench/cluster (N hosts joined by links shaped as
// SPEC: RATE[,DELAY[,LOSS]], e.g. 1gbit,200us; delay and loss by netem, or
// by the cluster's user-space switch where the kernel has no netem), runs
// mpirun across it over TCP and takes it down again, for each run. It
// checks, before anything runs, that the scripts are in dir and that this
// machine can make network namespaces.
func clusterLauncher(hosts int, link, dir string) ([]string, error) {
	if hosts <= 0 {
		return nil, usageErr("bench sweep: --link needs --hosts N (the test cluster's host count)")
	}
	run := filepath.Join(dir, "run.sh")
	if _, err := os.Stat(run); err != nil {
		return nil, usageErr("bench sweep: --hosts: no test cluster scripts at %s (run from the repository root, or give --cluster-dir)", run)
	}
	if err := cluster.Available(dir); err != nil {
		return nil, usageErr("bench sweep: --hosts: no test cluster on this machine: %v", err)
	}
	spec := cluster.Spec{Hosts: hosts, Link: link, Name: fmt.Sprintf("dmls%d", os.Getpid())}
	return append(append([]string{"bash", run}, spec.Args()...), "--"), nil
}
