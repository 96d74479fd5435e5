package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dml-project/dml/bench"
	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/mpi"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/trainer"
)

func cmdBench(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, "Usage: [mpirun -np N] dml bench <mode> [flags]\n\nModes:\n  allreduce     time AllReduce algorithms (ring, tree, mpi)\n  consistency   time-to-accuracy of BSP, SSP, ASP, DSSP, with and without a straggler\n  ops           each convolution, batch-norm and pool shape of a preset network on dml's kernels and on the library (oneDNN, cuDNN)\n  ps            parameter-server push/pull throughput (round trips/s, keys/s, GB/s, CPU)\n  sweep         train across rank counts × strategies × models × batch sizes, one MPI job each; CSV, JSON, plots\n")
		if len(args) == 0 {
			return usageErr("bench: which benchmark? (allreduce, consistency, ops, ps or sweep)")
		}
		return nil
	}
	switch args[0] {
	case "allreduce":
		return cmdBenchAllreduce(args[1:], stdout)
	case "consistency":
		return cmdBenchConsistency(args[1:], stdout)
	case "ops":
		return cmdBenchOps(args[1:], stdout)
	case "ps":
		return cmdBenchPS(args[1:], stdout)
	case "sweep":
		return cmdBenchSweep(args[1:], stdout, stderr)
	}
	return usageErr("bench: unknown mode %q (want allreduce, consistency, ops, ps or sweep)", args[0])
}

// sizeFlag is a byte count flag that accepts 4K/16M/1G suffixes.
type sizeFlag struct{ v *int64 }

func (s sizeFlag) String() string {
	if s.v == nil {
		return ""
	}
	return bench.FormatSize(*s.v)
}

func (s sizeFlag) Set(v string) error {
	n, err := bench.ParseSize(v)
	if err != nil {
		return err
	}
	*s.v = n
	return nil
}

func parseAlgos(s string) ([]collectives.Algorithm, error) {
	var out []collectives.Algorithm
	for _, name := range strings.Split(s, ",") {
		a, err := collectives.ParseAlgorithm(name)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func cmdBenchAllreduce(args []string, stdout io.Writer) error {
	cfg := bench.DefaultAllreduceConfig()
	fs := newFlags("bench allreduce", `Usage: mpirun -np N dml bench allreduce [flags]

Times AllReduce (float32 sum) for each algorithm and message size and
prints an nccl-tests style table: size, count, time (median µs over -n
iterations of the slowest rank), algbw = size/time, busbw = algbw·2(n−1)/n,
and #wrong (elements that differ from the exact expected sum).`, stdout)
	fs.Var(sizeFlag{&cfg.MinBytes}, "b", "min message size in bytes (4K, 16M, … accepted)")
	fs.Var(sizeFlag{&cfg.MaxBytes}, "e", "max message size in bytes")
	fs.Int64Var(&cfg.Factor, "f", cfg.Factor, "multiply the size by this factor between steps")
	fs.IntVar(&cfg.Iters, "n", cfg.Iters, "timed iterations per size")
	fs.IntVar(&cfg.Warmup, "w", cfg.Warmup, "warm-up iterations per size (not timed)")
	algos := fs.String("algo", "ring,tree,mpi", "comma-separated algorithms: ring, tree (recursive doubling), mpi (MPI_Allreduce), auto")
	format := fs.String("format", "table", "output format: table, csv or json")
	segBytes := int64(0)
	fs.Var(sizeFlag{&segBytes}, "segment", "ring pipelining segment size (default: whole chunks up to 1M, 256K segments above)")
	avg := fs.Bool("avg", false, "average instead of sum")
	fs.BoolVar(&cfg.LengthCheck, "length-check", false, "check every rank's length before each AllReduce (what ring and auto do when called without dml train, which agrees on the lengths at start-up and skips it): about 1 µs at 2 ranks")
	var pf profFlags
	pf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	var err error
	if cfg.Algorithms, err = parseAlgos(*algos); err != nil {
		return usageErr("bench allreduce: --algo: %v", err)
	}
	if err := bench.CheckFormat(*format); err != nil {
		return usageErr("bench allreduce: --format: %v", err)
	}
	if *avg {
		cfg.Op = collectives.Avg
	}
	cfg.SegmentBytes = int(segBytes)
	if err := cfg.Validate(); err != nil {
		return usageErr("bench allreduce: %v", err)
	}
	// The message buffer of the largest size, and the algorithms' scratch
	// (a tree's or MPI's copy of it): three times -e.
	if err := guardMemory("bench allreduce", fmt.Sprintf("-e %s", bench.FormatSize(cfg.MaxBytes)), 3*float64(cfg.MaxBytes), "lower -e"); err != nil {
		return err
	}
	if err := pf.check(); err != nil {
		return err
	}

	return withWorldBegun(mpi.DefaultTimeout, pf.begin, func(c collectives.Comm) (err error) {
		c = pf.comm(c)
		var rw *bench.RowWriter
		if c.Rank() == 0 {
			rw, _ = bench.NewRowWriter(stdout, *format)
			if *format == "table" {
				fmt.Fprintf(stdout, "# dml bench allreduce: %d ranks, sizes %s..%s ×%d, %d iterations after %d warm-up\n",
					c.Size(), bench.FormatSize(cfg.MinBytes), bench.FormatSize(cfg.MaxBytes), cfg.Factor, cfg.Iters, cfg.Warmup)
			}
		}
		// Machine-readable formats stream a row per measurement; the table
		// groups rows by algorithm, so it is printed at the end.
		rows, err := bench.RunAllreduce(c, cfg, func(batch []bench.Row) {
			if *format != "table" {
				for _, r := range batch {
					rw.Write(r)
				}
			}
		})
		if err != nil {
			return err
		}
		if c.Rank() == 0 {
			if *format == "table" {
				for _, a := range cfg.Algorithms {
					for _, r := range rows {
						if r.Algo == string(a) {
							rw.Write(r)
						}
					}
				}
				writeRatios(stdout, rows)
			}
			rw.Close()
			for _, r := range rows {
				if r.Wrong > 0 {
					return fmt.Errorf("bench allreduce: %s at %d bytes gave %d wrong elements", r.Algo, r.Size, r.Wrong)
				}
			}
		}
		return nil
	})
}

// writeRatios prints, under the table, each algorithm's busbw relative to
// MPI_Allreduce's at every size (when both were measured).
func writeRatios(w io.Writer, rows []bench.Row) {
	base := map[int64]float64{}
	for _, r := range rows {
		if r.Algo == string(collectives.Native) {
			base[r.Size] = r.BusBW
		}
	}
	if len(base) == 0 {
		return
	}
	fmt.Fprintf(w, "#\n# busbw relative to mpi (MPI_Allreduce), measured side by side\n#%12s", "size(B)")
	var algos []string
	seen := map[string]bool{}
	for _, r := range rows {
		if r.Algo != string(collectives.Native) && !seen[r.Algo] {
			seen[r.Algo] = true
			algos = append(algos, r.Algo)
			fmt.Fprintf(w, " %9s", r.Algo)
		}
	}
	fmt.Fprintln(w)
	var sizes []int64
	for _, r := range rows {
		if r.Algo == string(collectives.Native) {
			sizes = append(sizes, r.Size)
		}
	}
	for _, size := range sizes {
		fmt.Fprintf(w, " %12d", size)
		for _, a := range algos {
			for _, r := range rows {
				if r.Algo == a && r.Size == size && base[size] > 0 {
					fmt.Fprintf(w, " %8.2fx", r.BusBW/base[size])
				}
			}
		}
		fmt.Fprintln(w)
	}
}

// consistencyFlags are bench consistency's own flags beside dml train's.
type consistencyFlags struct {
	overlap        *overlapFlag
	models, format *string
	target         *float64
}

// registerConsistencyFlags registers bench consistency's flags: dml
// train's training and common flags (registerTrainFlags, commonFlags), and
// its own.
func registerConsistencyFlags(fs *flag.FlagSet, cfg *trainer.Config, cf *commonFlags, stderr io.Writer) consistencyFlags {
	bf := consistencyFlags{overlap: registerTrainFlags(fs, cfg)}
	bf.models = fs.String("models", strings.Join(bench.Strategies, ","), "strategies to compare: "+strings.Join(bench.Strategies, ", ")+" (a name may repeat)")
	bf.target = fs.Float64("target", 0.845, "test accuracy whose first epoch sets the time to target")
	bf.format = fs.String("format", "table", "output format: table, csv or json")
	cf.register(fs, stderr)
	return bf
}

func cmdBenchConsistency(args []string, stdout io.Writer) error {
	cfg := trainer.DefaultConfig()
	cfg.Sync = trainer.SyncPS
	cfg.Data = trainer.DataConfig{Name: "synthetic", Samples: 20000, Features: 50, Classes: 10, Noise: 2.5, NNZ: 50}
	// Synthetic 10-class data whose Bayes accuracy is about 0.85, and a
	// target just under it, so that the models differ in time to target.
	cfg.Hidden, cfg.Epochs, cfg.Opt.Kind = []int{128}, 6, optim.SGD
	var cf commonFlags
	fs := newFlags("bench consistency", `Usage: mpirun -np N dml bench consistency [training flags] [flags]

Trains the same job under each strategy (--models): through the parameter
server under each consistency model, and with AllReduce, D-PSGD and
AD-PSGD; first with all ranks at full speed, then with one worker slowed by
--straggle RANK:FACTOR (a real delay in its step; default: the last rank,
4×), and prints for each run the time to reach --target test accuracy, the
final accuracy, the largest staleness seen and the time a worker waited
(parameter server: the mean per worker; dpsgd, adpsgd: the reporting
rank's wait for its partners). Default job: an MLP on synthetic 10-class
data. Every training flag of 'dml train' applies (--data, --model,
--servers, --staleness, --topology, …); --sync is set by each strategy.`, stdout)
	bf := registerConsistencyFlags(fs, &cfg, &cf, os.Stderr)
	models, target, format := bf.models, bf.target, bf.format
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := settleConfig("bench consistency", fs, &cfg, &cf, bf.overlap); err != nil {
		return err
	}
	var list []bench.Strategy
	for _, m := range strings.Split(*models, ",") {
		st, err := bench.ParseStrategy(strings.TrimSpace(m))
		if err != nil {
			return usageErr("bench consistency: --models: %v", err)
		}
		list = append(list, st)
	}
	for _, m := range list {
		job := cfg
		m.Apply(&job)
		if err := job.Validate(); err != nil {
			return usageErr("bench consistency: %s: %s", m.Name, flagError(err))
		}
	}
	if err := bench.CheckFormat(*format); err != nil {
		return usageErr("bench consistency: --format: %v", err)
	}
	if !(*target > 0 && *target <= 1) {
		return usageErr("bench consistency: --target %v must be in (0, 1]", *target)
	}
	if err := cf.check(); err != nil {
		return err
	}
	// As dml train does: the output files checked before any training
	// (each run writes its own: bench.ConsistencyConfig).
	mem, err := limitMemory()
	if err != nil {
		return err
	}
	for flagName, path := range map[string]string{"--save": cfg.Save, "--metrics": cfg.Metrics} {
		if err := checkOutputDir(path); err != nil {
			return usageErr("bench consistency: %s: %v", flagName, err)
		}
	}
	return withWorldBegun(cf.timeout, cf.begin, func(c collectives.Comm) (err error) {
		for _, m := range list {
			job := cfg
			m.Apply(&job)
			if err := job.ValidateWorld(c.Size()); err != nil {
				return usageErr("bench consistency: %s: %s", m.Name, flagError(err))
			}
		}
		st := cfg.Straggle
		if st.Rank < 0 {
			st = trainer.Straggle{Rank: c.Size() - 1, Factor: 4}
		}
		bc := bench.ConsistencyConfig{Base: cfg, Strategies: list, Straggle: st, Target: *target, Tracer: cf.tracer(),
			MemoryLimit: mem.limit, MemorySource: mem.source}
		bc.Base.Straggle = trainer.Straggle{Rank: -1, Factor: 1}
		rows, err := bench.RunConsistency(c, cf.newBackend, bc, nil)
		if err != nil {
			return flagErrorWrap(err)
		}
		if c.Rank() == cfg.PS.Servers {
			return bench.WriteConsistency(stdout, *format, *target, rows)
		}
		return nil
	})
}
