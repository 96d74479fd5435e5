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
	"strings"
	"time"

	"github.com/dml-project/dml/trainer"
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
  launch            run train under a supervisor: relaunch on the survivors when a rank dies
  devices           the GPUs each rank sees and uses (CUDA builds)
  version           print the version

Run 'dml <command> --help' for a command's flags.
`

// version is set at build time by the Makefile (-ldflags -X main.version=…).
var version = "dev"

// errUsage marks errors that are the user's input: exit code 2, with a hint.
var errUsage = errors.New("usage")

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

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

// quietRankWait is how long a rank other than 0 waits before it prints a
// usage error itself: mpirun kills it well before when rank 0 found the
// same error and exited.
const quietRankWait = 2 * time.Second

func isUsage(err error) bool { return errors.Is(err, errUsage) || errors.Is(err, trainer.ErrUsage) }

// message is err's text without the "usage: " marker.
func message(err error) string {
	return strings.TrimPrefix(err.Error(), errUsage.Error()+": ")
}

// envRank is this process's rank in an MPI job as its launcher tells it
// ("" outside one), readable before MPI starts.
func envRank() string {
	r := os.Getenv("OMPI_COMM_WORLD_RANK")
	if r == "" {
		r = os.Getenv("PMI_RANK")
	}
	return r
}

// printsErrors is true on the rank that reports usage errors: rank 0 of an
// MPI job (every rank sees the same flags, so one message is enough), or
// the only process.
func printsErrors() bool {
	r := envRank()
	return r == "" || r == "0"
}

// helps holds each FlagSet's help printer: the flag package would call
// fs.Usage on every parse error too, and a mistyped flag should get one
// line, not the whole help.
var helps = map[*flag.FlagSet]func(){}

// newFlags returns a FlagSet whose help (synopsis and flags) goes to stdout
// on --help only; parse turns its errors into usage errors.
func newFlags(name, synopsis string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	helps[fs] = func() {
		fmt.Fprintf(stdout, "%s\n\nFlags:\n", synopsis)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// parse parses args, mapping errors to usage errors (and --help to flag.ErrHelp).
// A boolean flag takes its value after a space too ("--shuffle false"), as
// the other flags do (joinSpaced).
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(joinSpaced(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			helps[fs]()
			return err
		}
		return usageErr("%s: %v (see 'dml %s --help')", fs.Name(), err, fs.Name())
	}
	if fs.NArg() > 0 {
		return usageErr("%s: unexpected argument %q (see 'dml %s --help')", fs.Name(), fs.Arg(0), fs.Name())
	}
	return nil
}

// spacedValue is implemented by a boolean flag (one that stands alone, as
// --overlap does) whose values other than true and false may also follow
// it after a space ("--overlap auto").
type spacedValue interface {
	takesSpaced(word string) bool
}

// joinSpaced rewrites "--name VALUE" as "--name=VALUE" where --name is one
// of fs's boolean flags and VALUE one of its values (true or false, or what
// the flag's takesSpaced accepts): package flag reads a boolean flag's
// value only after "=", so "--shuffle false" — as the other flags are
// written — would end the flags at "false". dml takes no positional
// arguments, so a word after a boolean flag is never one.
func joinSpaced(fs *flag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		isFlag := strings.HasPrefix(a, "-")
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-") // -name or --name
		if f := fs.Lookup(name); isFlag && !strings.Contains(name, "=") && f != nil && i+1 < len(args) {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				next := args[i+1]
				sp, hasOwn := f.Value.(spacedValue)
				if next == "true" || next == "false" || (hasOwn && sp.takesSpaced(next)) {
					out = append(out, a+"="+next)
					i++
					continue
				}
			}
		}
		out = append(out, a)
	}
	return out
}
