// Command dml is the distributed trainer's CLI: `dml train`, `dml eval` and
// `dml bench …`, each run as one rank of an MPI job (or alone, as a world of
// one rank). The work lives in the packages; this file parses flags, wires
// them together and formats output.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

const usage = `dml — distributed training over MPI (AllReduce, parameter server, or decentralized averaging)

Usage:
  mpirun -np N dml <command> [flags]
  dml <command> [flags]            (a world of one rank)

Commands:
  train             train a model data-parallel across the ranks
  eval              evaluate saved weights on a dataset
  bench allreduce   time AllReduce algorithms (nccl-tests style table)
  bench consistency time to accuracy of every strategy, with and without a straggler
  bench ps          parameter-server push/pull throughput (ps-lite's benchmark)
  bench sweep       train across rank counts × strategies × models × batches (one MPI job each; CSV, JSON, plots)
  bench ops         each convolution, batch-norm and pool shape of a preset network on dml's kernels and on the library
  launch            run train under a supervisor: relaunch on the survivors when a rank dies
  devices           the GPUs each rank sees and uses (CUDA builds)
  version           print the version

Run 'dml <command> --help' for a command's flags.
`

// version is set at build time by the Makefile (-ldflags -X main.version=…).
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches a command line and returns the exit code: 0 success,
// 1 failure at run time, 2 bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "version", "--version":
		fmt.Fprintln(stdout, "dml", version)
		return 0
	case "bench":
		err = cmdBench(args[1:], stdout, stderr)
	case "train":
		err = cmdTrain(args[1:], stdout, stderr)
	case "eval":
		err = cmdEval(args[1:], stdout, stderr)
	case "devices":
		err = cmdDevices(args[1:], stdout, stderr)
	case "launch":
		err = cmdLaunch(args[1:], stdout, stderr)
	default:
		err = usageErr("unknown command %q (want train, eval, bench, launch, devices or version; see 'dml --help')", args[0])
	}
	return report(err, stderr)
}

func report(err error, stderr io.Writer) int {
	err = wordFlags(err)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(reported)):
		if isUsage(err) {
			return 2
		}
		return 1
	case errors.As(err, new(exitCode)):
		var ec exitCode
		errors.As(err, &ec)
		fmt.Fprintf(stderr, "dml: %v\n", err)
		return ec.code
	case errors.As(err, new(interrupted)):
		var in interrupted
		errors.As(err, &in)
		if printsErrors() {
			fmt.Fprintf(stderr, "dml: %v\n", err)
		}
		return in.status
	case isUsage(err):
		if printsErrors() {
			fmt.Fprintf(stderr, "dml: %s\n", message(err))
		} else {
			// mpirun kills the job as soon as one rank exits non-zero: the
			// other ranks give rank 0 a moment to print the message first
			// (every rank reads the same flags, so rank 0 finds the same
			// error). A rank still alive after that moment found an error
			// rank 0 did not (an MPMD command line with different flags):
			// it says so itself, naming its rank, and its exit ends the job.
			time.Sleep(quietRankWait)
			fmt.Fprintf(stderr, "dml: rank %s: %s\n", envRank(), message(err))
		}
		return 2
	default:
		fmt.Fprintf(stderr, "dml: %v\n", err)
		return 1
	}
}
