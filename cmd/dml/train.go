package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/dml-project/dml/bench"
	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/mpi"
	"github.com/dml-project/dml/internal/elastic"
	_ "github.com/dml-project/dml/kernels/blas" // registers the "blas" backend (OpenBLAS, loaded at run time)
	_ "github.com/dml-project/dml/kernels/cpu"  // registers the "cpu" backend
	"github.com/dml-project/dml/trainer"
	"github.com/dml-project/dml/trainer/atomicfile"
)

// trainUsage is dml train --help's text before the flags.
const trainUsage = `Usage: mpirun -np N dml train [flags]

Trains a model data-parallel: every rank holds a strided shard of the data,
computes the gradient of its part of each global batch (N × --batch
samples), the ranks sum the gradients with one AllReduce per step, and each
applies the same update. Rank 0 prints one line per epoch.

With --sync ps, ranks 0..S-1 are parameter servers holding key ranges of
the model and the optimizer state; the other ranks are workers that pull
weights and push gradients under the --consistency model (BSP, SSP with
--staleness, ASP, DSSP with --staleness-range). The first worker prints.

Before training, the ranks check that they were given the same flags and
loaded the same data, and that the model and data fit in each rank's
memory (the node's available memory shared by its ranks;
DML_MEMORY_LIMIT=8G sets it per rank, 0 turns the check off).

Examples:
  mpirun -np 2 dml train --model mlp --hidden 256,128 --data fashion-mnist \
      --epochs 5 --batch 64 --lr 0.05 --sync allreduce
  mpirun -np 5 dml train --sync ps --servers 1 --consistency ssp --staleness 3 \
      --model mlp --data fashion-mnist`

func cmdTrain(args []string, stdout, stderr io.Writer) error {
	defer catchEarlyStop()()
	cfg := trainer.DefaultConfig()
	var cf commonFlags
	fs := newFlags("train", trainUsage, stdout)
	tf := registerAllTrainFlags(fs, &cfg, &cf, stderr)
	overlap, progress, runReportPrefix, ckf := tf.overlap, tf.progress, tf.runReport, tf.ckf
	if err := parse(fs, resumeArgs(args)); err != nil {
		return err
	}
	bar, err := showProgress(*progress, stdout)
	if err != nil {
		return err
	}
	if err := settleConfig("train", fs, &cfg, &cf, overlap); err != nil {
		return err
	}
	for flagName, path := range map[string]string{"--save": cfg.Save, "--metrics": cfg.Metrics, "--run-report": *runReportPrefix} {
		if err := checkOutputDir(path); err != nil {
			return usageErr("train: %s: %v", flagName, err)
		}
	}
	if err := cf.check(); err != nil {
		return err
	}
	mem, err := limitMemory()
	if err != nil {
		return err
	}
	ck, err := ckf.check()
	if err != nil {
		return err
	}
	inputs := append(dataInputs(cfg.Data), namedPath{"--model-file", modelFilePath(fs)})
	if ck != nil {
		inputs = append(inputs, namedPath{"--resume", ck.ResumeFile})
	}
	if err := checkOverwrites("train", []namedPath{{"--save", cfg.Save}, {"--metrics", cfg.Metrics}, {"--timeline", cf.timeline}}, inputs); err != nil {
		return err
	}
	return withWorldBegun(cf.timeout, cf.begin, func(c collectives.Comm) (err error) {
		if err := cfg.ValidateWorld(c.Size()); err != nil {
			return usageErr("%s", flagError(err))
		}
		// A backend may fail on one node only (a library or a device
		// missing there): the ranks agree before going on.
		be, openErr := cf.newBackend()
		if err := trainer.AgreeToStart(c, "open its --backend", openErr, 0); err != nil {
			if openErr == nil { // another rank failed: close ours
				be.Close()
			}
			return err
		}
		defer be.Close()
		c, rep := startRunReport(*runReportPrefix, c)
		tr := &trainer.Trainer{Comm: c, Backend: be, Out: flagWords{stdout}, Warnings: flagWords{stderr}, Progress: bar, MemoryLimit: mem.limit, MemorySource: mem.source, Checkpoint: ck}
		tr.Tracer = cf.tracer()
		tr.CUDAGraph = cf.cudaGraph == "auto"
		if ck.Emergency && ck.Dir != "" {
			defer keepLastWord(c.Rank(), tr, stderr, cf.ownTimeline)()
		}
		if elastic.EventsOn() && c.Rank() == cfg.ReportingRank() {
			elastic.Send(map[string]any{"event": "up", "ranks": c.Size()})
			tr.FirstStep = func(steps int) {
				elastic.Send(map[string]any{"event": "first-step", "steps": steps, "ranks": c.Size()})
			}
		}
		got := func() os.Signal { return nil }
		if cfg.StopsAtBoundaries() {
			var done func()
			tr.Stop, got, done = stopSignals(c.Rank(), stderr)
			tr.Interrupt = tr.Stop
			defer done()
		}
		res, err := tr.Run(cfg)
		if err == nil && c.Rank() == cfg.ReportingRank() {
			elastic.Send(map[string]any{"event": "done", "steps": res.Steps})
		}
		if rerr := rep.finish(res, err); err == nil {
			err = rerr
		}
		if err != nil {
			if errors.Is(err, trainer.ErrInterrupted) {
				status := exitStatus(syscall.SIGTERM) // another rank's signal
				if s := got(); s != nil {
					status = exitStatus(s)
				}
				return interrupted{err, status}
			}
			return flagErrorWrap(err)
		}
		return nil
	})
}

// rankMemory is the memory one rank may use for its data and model.
type rankMemory struct {
	limit  int64 // bytes; 0: unchecked
	source string
}

// memoryLimit is what a rank of `dml train` may allocate: the node's
// available memory (MemAvailable, or the cgroup's limit if lower) shared
// evenly by the node's ranks; DML_MEMORY_LIMIT (bytes, K/M/G suffixes; 0:
// no check) overrides it per rank.
func memoryLimit() (rankMemory, error) {
	if v, ok := os.LookupEnv("DML_MEMORY_LIMIT"); ok && v != "" {
		if strings.TrimSpace(v) == "0" {
			return rankMemory{}, nil
		}
		n, err := bench.ParseSize(v)
		if err != nil || n < 0 {
			return rankMemory{}, usageErr("DML_MEMORY_LIMIT=%q: want a number of bytes per rank (e.g. 8G; 0: no check)", v)
		}
		return rankMemory{n, "DML_MEMORY_LIMIT"}, nil
	}
	avail, ok := trainer.AvailableMemory()
	if !ok {
		return rankMemory{}, nil
	}
	local := max(1, mpi.LocalSize())
	src := "the node's available memory"
	if local > 1 {
		src += fmt.Sprintf(" shared by its %d ranks", local)
	}
	return rankMemory{avail / int64(local), src}, nil
}

// guardMemory refuses, before anything is allocated, a command whose
// buffers (need bytes on each rank, sized by the user's numbers) do not fit
// the memory a rank may use (memoryLimit): the benches' counterpart of the
// trainer's check.
func guardMemory(cmd, what string, need float64, fix string) error {
	mem, err := memoryLimit()
	if err != nil {
		return err
	}
	if err := trainer.CheckMemory(mem.limit, mem.source, what, need, fix); err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	return nil
}

// limitMemory is memoryLimit for a command that trains, which also gives
// the limit to Go's collector as its soft target: the estimates count live
// data, and the collector otherwise lets the heap grow to twice what is
// live before it runs, so that what passed the check might not fit.
func limitMemory() (rankMemory, error) {
	mem, err := memoryLimit()
	if err == nil && mem.limit > 0 {
		debug.SetMemoryLimit(mem.limit)
	}
	return mem, err
}

// checkOutputDir fails early, before any training, when path could not be
// written later: its folder is missing or not writable (a temporary file is
// created and removed there), or path is a folder.
func checkOutputDir(path string) error {
	if path == "" {
		return nil
	}
	return atomicfile.CheckWritable(path)
}

// showProgress decides on the progress bar. Under mpirun a rank's stdout is
// a pseudo-terminal even when mpirun's own output goes to a file, so "auto"
// draws the bar only outside mpirun.
func showProgress(mode string, stdout io.Writer) (bool, error) {
	switch mode {
	case "always":
		return true, nil
	case "never":
		return false, nil
	case "auto":
		return trainer.IsTerminal(stdout) && !mpi.Launched(), nil
	}
	return false, usageErr("train: --progress %q: want auto, always or never", mode)
}
