// Package sweep runs `dml bench sweep`: one `dml train` job per combination
// of rank count, strategy, model and batch size, each launched as its own
// MPI job, and turns what each job measured (its --metrics lines and one
// end-of-run report per rank) into rows of a table, CSV and JSON files
// appended run by run, and plots.
//
// The package does no flag parsing: a Spec comes from cmd/dml's flags or a
// YAML file, Plan expands it into Runs, a Runner launches them and Measure
// turns their files into Rows. The arithmetic (Aggregate, Efficiency) is
// pure and table-tested.
package sweep

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dml-project/dml/bench"
	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/trainer"
)

// ErrSpec is wrapped by every error in a sweep's specification (an unknown
// strategy or model, zero ranks, …): the command exits 2 before any run.
var ErrSpec = errors.New("invalid sweep")

func specErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSpec, fmt.Sprintf(format, args...))
}

// Spec is a sweep: every combination of Ranks × Strategies × Models ×
// Batches is one run of `dml train`. Field names are the YAML keys.
type Spec struct {
	Ranks      []int    `yaml:"ranks"`
	Strategies []string `yaml:"sync"`  // see StrategyNames
	Models     []string `yaml:"model"` // dml train's models (trainer.Models); mlp:HIDDEN (e.g. mlp:256,128)
	Batches    []int    `yaml:"batch"` // per rank, as dml train's --batch
	Epochs     int      `yaml:"epochs"`
	Servers    int      `yaml:"servers"` // parameter servers of the ps-* strategies
	// Data is dml train's --data; Samples, Features, Classes and Noise are
	// its synthetic-data flags (passed with --data synthetic only).
	Data     string  `yaml:"data"`
	Samples  int     `yaml:"samples"`
	Features int     `yaml:"features"`
	Classes  int     `yaml:"classes"`
	Noise    float64 `yaml:"noise"`
	// Target is the test accuracy whose first epoch counts for time to
	// target.
	Target float64 `yaml:"target"`
	// TrainArgs are passed to every `dml train` after the sweep's own
	// (e.g. --backend cpu, --lr 0.1).
	TrainArgs []string `yaml:"-"`
	// Launcher is the command that starts an MPI job; "{np}" in it is
	// replaced by the rank count, else "-np N" is appended.
	Launcher []string `yaml:"-"`
	// RunTimeout bounds each run; a run past it is killed and failed.
	RunTimeout time.Duration `yaml:"run_timeout"`
}

// DefaultSpec is a sweep that finishes in a few minutes on 2 cores: 1, 2
// and 4 ranks; allreduce, a parameter server under BSP, SSP and ASP, D-PSGD
// and AD-PSGD; dml train's default MLP on synthetic data (no download
// needed; 10 classes, hard enough that accuracy ends near 0.8), 2 epochs.
func DefaultSpec() Spec {
	return Spec{
		Ranks:      []int{1, 2, 4},
		Strategies: []string{"allreduce", "ps-bsp", "ps-ssp", "ps-asp", "dpsgd", "adpsgd"},
		Models:     []string{"mlp:256,128"},
		Batches:    []int{32},
		Epochs:     2,
		Servers:    1,
		Data:       "synthetic",
		Samples:    60000,
		Features:   32,
		Classes:    10,
		Noise:      2,
		Target:     0.8,
		Launcher:   []string{"mpirun", "--oversubscribe"},
		RunTimeout: 5 * time.Minute,
	}
}

// Strategy is one way the ranks combine their work, as a sweep names it:
// allreduce, allreduce-ALGORITHM, ps-CONSISTENCY, dpsgd, adpsgd.
type Strategy struct {
	Name string
	// Args are dml train's flags for it (--sync …).
	Args []string
	// Family groups the strategies whose 1-rank runs are the same job:
	// every allreduce algorithm is "allreduce".
	Family string
	// PS: the strategy trains through parameter servers.
	PS bool
}

// StrategyNames lists the names ParseStrategy accepts: allreduce and
// allreduce-<algorithm> for each collectives.Algorithms, ps-<consistency>
// for bench.Strategies' parameter-server models, and the other syncs.
func StrategyNames() []string {
	allreduce := trainer.SyncAllreduce.String()
	out := []string{allreduce}
	for _, a := range collectives.Algorithms {
		out = append(out, allreduce+"-"+string(a))
	}
	for _, s := range bench.Strategies {
		st, err := bench.ParseStrategy(s)
		switch {
		case err != nil || s == allreduce:
		case st.Servers:
			out = append(out, "ps-"+s)
		default:
			out = append(out, s)
		}
	}
	return out
}

// ParseStrategy reads one strategy name (see StrategyNames); servers is the
// parameter servers a ps-* strategy gets.
func ParseStrategy(name string, servers int) (Strategy, error) {
	name = strings.ToLower(strings.TrimSpace(name))
	if base, mods, ok := strings.Cut(name, "+"); ok {
		st, err := ParseStrategy(base, servers)
		if err != nil {
			return Strategy{}, err
		}
		return st.with(name, strings.Split(mods, "+"))
	}
	allreduce := trainer.SyncAllreduce.String()
	unknown := func(why error) error {
		msg := fmt.Sprintf("unknown strategy %q (want %s)", name, strings.Join(StrategyNames(), ", "))
		if why != nil {
			msg += ": " + why.Error()
		}
		return specErr("%s", msg)
	}
	if rest, ok := strings.CutPrefix(name, allreduce+"-"); ok {
		a, err := collectives.ParseAlgorithm(rest)
		if err != nil {
			return Strategy{}, unknown(err)
		}
		return Strategy{Name: name, Family: allreduce, Args: []string{"--sync", allreduce, "--allreduce", string(a)}}, nil
	}
	if rest, ok := strings.CutPrefix(name, "ps-"); ok {
		st, err := bench.ParseStrategy(rest)
		if err != nil || !st.Servers {
			return Strategy{}, unknown(err)
		}
		if servers < 1 {
			return Strategy{}, specErr("--servers %d: a parameter server strategy needs at least 1", servers)
		}
		return Strategy{Name: name, Family: name, PS: true,
			Args: []string{"--sync", st.Sync.String(), "--consistency", st.Name, "--servers", strconv.Itoa(servers)}}, nil
	}
	st, err := bench.ParseStrategy(name)
	if err != nil {
		return Strategy{}, unknown(nil)
	}
	if st.Servers {
		return Strategy{}, specErr("unknown strategy %q: did you mean ps-%s?", name, name)
	}
	if name == allreduce {
		return Strategy{Name: name, Family: allreduce, Args: []string{"--sync", allreduce, "--allreduce", string(collectives.Auto)}}, nil
	}
	return Strategy{Name: name, Family: name, Args: []string{"--sync", name}}, nil
}

// with adds an allreduce strategy's modes, each after a "+": fp16, bf16
// or auto (--compress), ef (--error-feedback), localH (--local-steps H):
// "allreduce+fp16+ef", "allreduce-ring+local4". A rank's 1-rank run is the
// same job whatever the modes (one rank compresses nothing and averages
// one model), so the family stays the strategy's.
func (st Strategy) with(name string, mods []string) (Strategy, error) {
	if st.Family != trainer.SyncAllreduce.String() {
		return Strategy{}, specErr("strategy %q: modes after + (fp16, bf16, auto, ef, localH) are allreduce's", name)
	}
	st.Name, st.Args = name, slices.Clone(st.Args)
	set := map[string]string{} // flag → the mode that set it
	for _, m := range mods {
		var flag, value string
		switch {
		case m == trainer.CompressFP16 || m == trainer.CompressBF16 || m == trainer.CompressAuto:
			flag, value = "--compress", m
		case m == "ef":
			flag = "--error-feedback"
		case strings.HasPrefix(m, "local"):
			h, err := strconv.Atoi(strings.TrimPrefix(m, "local"))
			if err != nil || h < 1 {
				return Strategy{}, specErr("strategy %q: %q: want localH, H a step count of 1 or more", name, m)
			}
			flag, value = "--local-steps", strconv.Itoa(h)
		default:
			return Strategy{}, specErr("strategy %q: unknown mode %q (want fp16, bf16, auto, ef or localH)", name, m)
		}
		switch prev, ok := set[flag]; {
		case ok && prev == m:
			return Strategy{}, specErr("strategy %q: mode %q given twice", name, m)
		case ok:
			return Strategy{}, specErr("strategy %q: %q and %q both set one thing: give one", name, prev, m)
		}
		set[flag] = m
		st.Args = append(st.Args, flag)
		if value != "" {
			st.Args = append(st.Args, value)
		}
	}
	return st, nil
}

// Model is a model as a sweep names it: "mlp:256,128" is an MLP with those
// hidden layers, "mlp" one with dml train's default.
type Model struct {
	Name string
	Args []string
}

// Binary reports whether the model is a binary classifier (logreg).
func (m Model) Binary() bool { return slices.Contains(m.Args, trainer.Logreg.String()) }

// perRunFlags are dml train's flags that name a path every run would
// write: each run gets its own (PerRunPaths).
var perRunFlags = map[string]bool{"save": true, "checkpoint-dir": true}

// PerRunPaths is a sweep's --train-args for run id: --checkpoint-dir DIR
// becomes DIR/ID, and --save FILE becomes ID-FILE in FILE's folder, so
// that runs do not write over each other's checkpoints and weights (and
// --resume resumes each run from its own folder).
func PerRunPaths(args []string, id string) []string {
	perRun := func(flag, path string) string {
		if flag == "save" {
			return filepath.Join(filepath.Dir(path), id+"-"+filepath.Base(path))
		}
		return filepath.Join(path, id)
	}
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(out[i], "-"), "=")
		switch {
		case !strings.HasPrefix(out[i], "-") || !perRunFlags[name]:
		case hasValue: // --save=FILE
			out[i] = strings.TrimSuffix(out[i], value) + perRun(name, value)
		case i+1 < len(out): // --save FILE
			out[i+1] = perRun(name, out[i+1])
			i++
		}
	}
	return out
}

// ParseModel reads a model name (trainer.Models, with ":HIDDEN" for mlp).
func ParseModel(s string) (Model, error) {
	s = strings.TrimSpace(s)
	name, hidden, withHidden := strings.Cut(s, ":")
	kind, err := trainer.ParseModel(name)
	if err != nil {
		return Model{}, specErr("--model %q: %v (an mlp may name its hidden layers: mlp:256,128)", s, err)
	}
	args := []string{"--model", kind.String()}
	if withHidden {
		if kind != trainer.MLP {
			return Model{}, specErr("--model %q: only mlp has hidden layers", s)
		}
		for _, f := range strings.Split(hidden, ",") {
			if n, err := strconv.Atoi(f); err != nil || n <= 0 {
				return Model{}, specErr("--model %q: hidden layer %q is not a positive integer", s, f)
			}
		}
		args = append(args, "--hidden", hidden)
	}
	return Model{Name: s, Args: args}, nil
}

// Run is one job of the sweep.
type Run struct {
	ID       string // unique, usable as a folder name: mlp-64_ps-bsp_b32_n2
	Model    Model
	Strategy Strategy
	Ranks    int
	Batch    int
	// Args are dml train's arguments, without the launcher and the output
	// files (the Runner adds --metrics and --run-report).
	Args []string
}

// Plan validates s and expands it into runs, ordered model, batch, ranks
// (ascending), strategy: every run's 1-rank baseline comes before it.
func Plan(s Spec) ([]Run, error) {
	if len(s.Ranks) == 0 || len(s.Strategies) == 0 || len(s.Models) == 0 || len(s.Batches) == 0 {
		return nil, specErr("a sweep needs at least one rank count, strategy, model and batch size")
	}
	for _, n := range s.Ranks {
		if n <= 0 {
			return nil, specErr("--ranks: %d ranks: want a positive count", n)
		}
	}
	for _, b := range s.Batches {
		if b <= 0 {
			return nil, specErr("--batch: %d: want a positive size", b)
		}
	}
	switch {
	case s.Epochs <= 0:
		return nil, specErr("--epochs %d: want at least 1", s.Epochs)
	case !(s.Target > 0 && s.Target <= 1):
		return nil, specErr("--target %v: want an accuracy in (0, 1]", s.Target)
	case len(s.Launcher) == 0:
		return nil, specErr("--launcher is empty")
	case s.RunTimeout <= 0:
		return nil, specErr("--run-timeout %v: want a positive duration", s.RunTimeout)
	}
	var strategies []Strategy
	for _, name := range s.Strategies {
		st, err := ParseStrategy(name, s.Servers)
		if err != nil {
			return nil, err
		}
		strategies = append(strategies, st)
	}
	var models []Model
	for _, name := range s.Models {
		m, err := ParseModel(name)
		if err != nil {
			return nil, err
		}
		models = append(models, m)
	}
	ranks := slices.Clone(s.Ranks)
	slices.Sort(ranks)
	ranks = slices.Compact(ranks)
	// The data flags of a model's runs: logreg is binary, so on synthetic
	// data its runs get 2 classes (the others, --classes).
	dataFor := func(m Model) []string {
		data := []string{"--data", s.Data}
		if s.Data == "synthetic" {
			classes := s.Classes
			if m.Binary() {
				classes = 2
			}
			data = append(data, "--samples", strconv.Itoa(s.Samples), "--features", strconv.Itoa(s.Features),
				"--classes", strconv.Itoa(classes), "--noise", strconv.FormatFloat(s.Noise, 'g', -1, 64))
		}
		return data
	}
	seen := map[string]bool{}
	var runs []Run
	for _, m := range models {
		for _, b := range s.Batches {
			for _, n := range ranks {
				for _, st := range strategies {
					id := fmt.Sprintf("%s_%s_b%d_n%d", fileSafe(m.Name), st.Name, b, n)
					if seen[id] {
						continue // a name given twice
					}
					seen[id] = true
					args := slices.Concat(m.Args, st.Args, dataFor(m),
						[]string{"--epochs", strconv.Itoa(s.Epochs), "--batch", strconv.Itoa(b), "--eval-every", "1", "--progress", "never"},
						PerRunPaths(s.TrainArgs, id))
					runs = append(runs, Run{ID: id, Model: m, Strategy: st, Ranks: n, Batch: b, Args: args})
				}
			}
		}
	}
	return runs, nil
}

// fileSafe replaces what a folder name should not hold.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, s)
}

// LauncherArgs is the command line that starts run: the launcher with
// "{np}" replaced by the rank count (or "-np N" appended), then the dml
// binary and the train arguments, then extra.
func LauncherArgs(launcher []string, dml string, run Run, extra ...string) []string {
	var out []string
	np := strconv.Itoa(run.Ranks)
	replaced := false
	for _, a := range launcher {
		if strings.Contains(a, "{np}") {
			a = strings.ReplaceAll(a, "{np}", np)
			replaced = true
		}
		out = append(out, a)
	}
	if !replaced {
		out = append(out, "-np", np)
	}
	out = append(out, dml, "train")
	out = append(out, run.Args...)
	return append(out, extra...)
}
