package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/dml-project/dml/bench"
	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/ps"
)

// psBenchUsage is dml bench ps --help's text before the flags.
const psBenchUsage = `Usage: mpirun -np N dml bench ps [flags]

Push/pull throughput of the parameter server, as ps-lite's benchmark
measures it: ranks 0..S-1 serve, the other ranks are workers that each
push a gradient and pull the weights in a loop (-n timed round trips after
-w warm-up ones). Dense: all --params keys each way; sparse: --keys K
random keys of a model of --of N. One row per consistency model (--consistency)
and filter (--filters): round trips/s per worker (mean and slowest), keys/s
and GB/s moved by all workers, CPU cores busy per server and per worker
rank (getrusage), and the share of a worker's time spent waiting in ps
calls. --fused sends each push and pull as one request (PushPull).

Examples:
  mpirun -np 2 dml bench ps --params 235146
  mpirun -np 3 dml bench ps --keys 5000 --of 1000000 --fused
  mpirun -np 4 dml bench ps --servers 2 --consistency bsp,asp --filters none,fp16,sigmod:0.001`

// psBenchFlags parses `dml bench ps` flags into a bench.PSConfig and the
// output format, and the profiling flags into pf; every problem is a
// usage error (exit 2).
func psBenchFlags(args []string, stdout io.Writer, pf *profFlags) (bench.PSConfig, string, error) {
	cfg := bench.DefaultPSConfig()
	fs := newFlags("bench ps", psBenchUsage, stdout)
	fs.IntVar(&cfg.Params, "params", cfg.Params, "dense: keys pushed and pulled each round trip (the model size)")
	fs.IntVar(&cfg.Keys, "keys", 0, "sparse: keys per round trip (with --of)")
	fs.IntVar(&cfg.Of, "of", 0, "sparse: model size the --keys are drawn from")
	fs.IntVar(&cfg.Servers, "servers", cfg.Servers, "server ranks (0..S-1); the other ranks are workers")
	fs.IntVar(&cfg.Iters, "n", cfg.Iters, "timed round trips per worker")
	fs.IntVar(&cfg.Warmup, "w", cfg.Warmup, "warm-up round trips per worker (not timed)")
	fs.BoolVar(&cfg.Fused, "fused", false, "one push+pull request per round trip (Worker.PushPull)")
	models := fs.String("consistency", "bsp", "consistency models, comma-separated: bsp, ssp, asp, dssp")
	oldModels := fs.String("models", "", "deprecated: --consistency")
	filters := fs.String("filters", "none", "filters, comma-separated alternatives, '+' chains: none, fp16, bf16, sigmod:T, sigmod:T+fp16")
	fs.IntVar(&cfg.Staleness, "staleness", cfg.Staleness, "SSP staleness bound")
	fs.Var(rangeFlag{&cfg.StalenessLow, &cfg.StalenessHigh}, "staleness-range", "dssp's range sL,sU (as dml train's)")
	fs.IntVar(&cfg.StalenessLow, "staleness-low", cfg.StalenessLow, "deprecated: --staleness-range sL,sU")
	fs.IntVar(&cfg.StalenessHigh, "staleness-high", cfg.StalenessHigh, "deprecated: --staleness-range sL,sU")
	timeout := fs.Duration("timeout", collectives.DefaultTimeout, "give up (and abort the job) when a peer does not answer for this long (as dml train's)")
	format := fs.String("format", "table", "output format: table, csv or json")
	replicate := fs.String("replicate-every", "0", "chain replication (as dml train's --replicate-every), comma-separated alternatives, a row each: 0 (none) or every N rounds (bsp) or updates")
	fs.TextVar(&cfg.Optimizer, "optimizer", cfg.Optimizer, "the servers' update: sgd, momentum, adagrad, adam, adamw or lars (dml train's rules; a rule's state is kept on the servers, and a replica carries it too)")
	pf.register(fs)
	if err := parse(fs, args); err != nil {
		return cfg, "", err
	}
	if err := pf.check(); err != nil {
		return cfg, "", err
	}
	set := given(fs)
	// The spellings before dml train's names: still taken, saying so.
	for old, now := range map[string]string{"models": "consistency", "staleness-low": "staleness-range", "staleness-high": "staleness-range"} {
		if !set[old] {
			continue
		}
		if set[now] {
			return cfg, "", usageErr("bench ps: give --%s, not also --%s (its old name)", now, old)
		}
		if printsErrors() {
			fmt.Fprintf(os.Stderr, "dml: bench ps: --%s is deprecated: use --%s (as dml train names it)\n", old, now)
		}
	}
	if set["models"] {
		*models = *oldModels
	}
	if set["keys"] || set["of"] {
		if set["params"] {
			return cfg, "", usageErr("bench ps: give either --params N (dense) or --keys K --of N (sparse), not both")
		}
		cfg.Params = 0
		if !set["keys"] || !set["of"] {
			return cfg, "", usageErr("bench ps: a sparse run needs both --keys K and --of N")
		}
	}
	cfg.Models = nil
	for _, m := range strings.Split(*models, ",") {
		c, err := ps.ParseConsistency(strings.TrimSpace(m))
		if err != nil {
			return cfg, "", usageErr("bench ps: --models: %v", err)
		}
		cfg.Models = append(cfg.Models, c)
	}
	var err error
	if cfg.Filters, err = bench.ParsePSFilters(*filters); err != nil {
		return cfg, "", usageErr("bench ps: --filters: %v", err)
	}
	cfg.Replicate = nil
	for _, r := range strings.Split(*replicate, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(r))
		if err != nil || n < 0 {
			return cfg, "", usageErr("bench ps: --replicate-every %q: want 0 (none) or positive counts, comma-separated", *replicate)
		}
		cfg.Replicate = append(cfg.Replicate, n)
	}
	if err := bench.CheckFormat(*format); err != nil {
		return cfg, "", usageErr("bench ps: --format: %v", err)
	}
	cfg.Timeout = *timeout
	if err := cfg.Validate(0); err != nil {
		return cfg, "", usageErr("bench ps: %v", err)
	}
	// A server holds its range of the model with its optimizer state and
	// the workers' pushes; a worker its keys, their values and gradients:
	// about four float32 vectors of the model (dense) or of the keys and
	// of the model (sparse) on a rank, counted as if on one server.
	what, floats := fmt.Sprintf("--params %d", cfg.Params), float64(cfg.Params)
	if cfg.Params == 0 {
		what, floats = fmt.Sprintf("--keys %d --of %d", cfg.Keys, cfg.Of), float64(cfg.Of)+3*float64(cfg.Keys)
	}
	if err := guardMemory("bench ps", what, 16*floats, "lower it"); err != nil {
		return cfg, "", err
	}
	return cfg, *format, nil
}

func cmdBenchPS(args []string, stdout io.Writer) error {
	var pf profFlags
	cfg, format, err := psBenchFlags(args, stdout, &pf)
	if err != nil {
		return err
	}
	return withWorldBegun(cfg.Timeout, pf.begin, func(c collectives.Comm) (err error) {
		c = pf.comm(c)
		if err := cfg.Validate(c.Size()); err != nil {
			return usageErr("bench ps: %v", err)
		}
		var pw *bench.PSWriter
		if c.Rank() == cfg.Servers {
			if format == "table" {
				what := fmt.Sprintf("dense, %d keys", cfg.Params)
				if cfg.Sparse() {
					what = fmt.Sprintf("sparse, %d random keys of %d", cfg.Keys, cfg.Of)
				}
				fmt.Fprintf(stdout, "# dml bench ps: %s, %d server(s), %d worker(s), %d round trips after %d warm-up\n",
					what, cfg.Servers, c.Size()-cfg.Servers, cfg.Iters, cfg.Warmup)
			}
			pw, _ = bench.NewPSWriter(stdout, format)
		}
		_, err = bench.RunPS(c, cfg, func(r bench.PSRow) { pw.Write(r) })
		if pw != nil {
			pw.Close()
		}
		return err
	})
}
