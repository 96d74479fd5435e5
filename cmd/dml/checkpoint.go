package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/dml-project/dml/internal/crash"
	"github.com/dml-project/dml/internal/regfile"
	"github.com/dml-project/dml/trainer"
)

// checkpointFlags are --checkpoint-dir, --checkpoint-every, --keep and
// --resume, parsed into a trainer.Checkpointing.
type checkpointFlags struct {
	ck    trainer.Checkpointing
	every string
}

func (f *checkpointFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.ck.Dir, "checkpoint-dir", "", "write checkpoints (weights, optimizer state, position; an .npz numpy reads) into this folder, atomically: on the --checkpoint-every schedule, at the end of training, and when a signal stops it")
	fs.StringVar(&f.every, "checkpoint-every", "", "checkpoint every N steps, or every N epochs with Ne (e.g. 500, 1e); needs --checkpoint-dir")
	fs.IntVar(&f.ck.Keep, "keep", trainer.DefaultKeep, "keep the newest K checkpoints in --checkpoint-dir")
	fs.BoolVar(&f.ck.Emergency, "emergency-checkpoint", true, "with --checkpoint-dir, under --sync allreduce or ps: when a rank is found dead, every survivor that holds the whole training state (allreduce: every rank; ps: a server that holds every key range, its own and its replica of the next one's, see --replicate-every) writes the state of the last step it completed at once, so that a resume loses at most the step in flight")
	fs.Var(resumeFlag{&f.ck}, "resume", "resume from the newest valid checkpoint in --checkpoint-dir (--resume), or from a file (--resume FILE)")
}

// resumeFlag is --resume (a bool flag: the newest in --checkpoint-dir) or
// --resume=FILE; resumeArgs turns "--resume FILE" into the latter.
type resumeFlag struct{ ck *trainer.Checkpointing }

func (f resumeFlag) String() string {
	if f.ck == nil {
		return "false"
	}
	if f.ck.ResumeFile != "" {
		return f.ck.ResumeFile
	}
	return strconv.FormatBool(f.ck.ResumeLatest)
}

func (f resumeFlag) Set(s string) error {
	f.ck.ResumeLatest, f.ck.ResumeFile = false, ""
	switch s {
	case "true":
		f.ck.ResumeLatest = true
	case "false":
	case "":
		return errors.New("empty file name")
	default:
		f.ck.ResumeFile = s
	}
	return nil
}

func (f resumeFlag) IsBoolFlag() bool { return true }

// resumeArgs rewrites "--resume FILE" (FILE not a flag) as "--resume=FILE",
// so that --resume works alone and with a file.
func resumeArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if (a == "--resume" || a == "-resume") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}

// check parses --checkpoint-every and checks the combination; it creates
// the folder and fails early when it cannot be written.
func (f *checkpointFlags) check() (*trainer.Checkpointing, error) {
	ck := &f.ck
	if e := strings.TrimSpace(f.every); e != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(e, "e"))
		if err != nil || n <= 0 {
			return nil, usageErr("train: --checkpoint-every %q: want a positive number of steps, or of epochs with e (500, 1e)", f.every)
		}
		if strings.HasSuffix(e, "e") {
			ck.EveryEpochs = n
		} else {
			ck.Every = n
		}
		if ck.Dir == "" {
			return nil, usageErr("train: --checkpoint-every needs --checkpoint-dir")
		}
	}
	switch {
	case ck.Keep < 1:
		return nil, usageErr("train: --keep %d: keep at least 1 checkpoint", ck.Keep)
	case ck.ResumeLatest && ck.Dir == "":
		return nil, usageErr("train: --resume without a file resumes from --checkpoint-dir: set it (or give --resume FILE)")
	}
	if ck.ResumeFile != "" {
		if err := regfile.Check(ck.ResumeFile); errors.Is(err, regfile.ErrNotRegular) {
			return nil, usageErr("train: --resume: %v, not a checkpoint file", err)
		} else if errors.Is(err, fs.ErrNotExist) {
			return nil, usageErr("train: --resume %s: no such file", ck.ResumeFile)
		} else if err != nil {
			return nil, usageErr("train: --resume %s: not a checkpoint file", ck.ResumeFile)
		}
	}
	if ck.Dir != "" {
		if err := os.MkdirAll(ck.Dir, 0o755); err != nil {
			return nil, usageErr("train: --checkpoint-dir: %v", err)
		}
		probe, err := os.CreateTemp(ck.Dir, ".dml-write-test-*")
		if err != nil {
			return nil, usageErr("train: --checkpoint-dir %s cannot be written: %v", ck.Dir, err)
		}
		probe.Close()
		os.Remove(probe.Name())
		// A fresh run would write its checkpoints among another run's and
		// prune theirs away (--keep): refused unless it resumes from them.
		if !ck.ResumeLatest && ck.ResumeFile == "" {
			files, err := trainer.ListCheckpoints(ck.Dir)
			if parts, _ := trainer.ListEmergencyParts(ck.Dir); err == nil && len(files) == 0 && len(parts) > 0 {
				files = parts // a ps job's parts of its last step (they are joined at --resume)
			}
			if err == nil && len(files) > 0 {
				more := ""
				if len(files) > 1 {
					more = fmt.Sprintf(" and %d older", len(files)-1)
				}
				return nil, usageErr("train: --checkpoint-dir %s holds the checkpoints of an earlier run (%s%s): continue it with --resume, or give another --checkpoint-dir", ck.Dir, filepath.Base(files[0]), more)
			}
		}
	}
	return ck, nil
}

// stopSignals turns SIGINT, SIGTERM and SIGUSR1 (dml launch's) into a
// stop request: the first asks
// training to stop at the next step boundary (the ranks agree on which;
// a final checkpoint is written with --checkpoint-dir); a second exits at
// once. It returns the trainer's Stop, the signal received (nil: none yet)
// and a function that stops listening.
func stopSignals(rank int, stderr io.Writer) (stop func() bool, got func() os.Signal, done func()) {
	var sig atomic.Value
	// A SIGUSR1 that catchEarlyStop took while this handler was being set
	// up (its Notify not yet in place) counts too: earlyStop always keeps
	// it.
	got = func() os.Signal {
		if s, _ := sig.Load().(os.Signal); s != nil {
			return s
		}
		if s := earlyStop.Load(); s != nil {
			return *s
		}
		return nil
	}
	// SIGUSR1 is dml launch's stop request: mpirun passes it on to the
	// ranks at once (SIGTERM only a second later, then SIGKILL).
	unlisten := listenSignals(func(s os.Signal) {
		switch {
		case peersGone():
			// watchGone reports the dead rank and ends this one
		case got() != nil && s == syscall.SIGUSR1:
			// dml launch asks once; its second word is SIGTERM
		case got() != nil: // a second signal (an early SIGUSR1 counts as the first)
			fmt.Fprintf(stderr, "dml: rank %d: second %v: exiting now\n", rank, s)
			os.Exit(exitStatus(s))
		default:
			sig.Store(s)
			fmt.Fprintf(stderr, "dml: rank %d: %v: stopping at the next step boundary (again to exit at once)\n", rank, s)
		}
	}, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1)
	stopsHandled.Store(true)
	if s := earlyStop.Load(); s != nil && sig.Load() == nil {
		fmt.Fprintf(stderr, "dml: rank %d: %v during start-up: stopping at the first step boundary\n", rank, *s)
	}
	return func() bool { return got() != nil }, got, func() { unlisten(); stopsHandled.Store(false) }
}

// listenSignals calls handle, on a goroutine of its own, with each of
// sigs that comes, until the function it returns is called.
func listenSignals(handle func(os.Signal), sigs ...os.Signal) (stop func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, sigs...)
	quit := make(chan struct{})
	go func() {
		defer crash.Recover()
		for {
			select {
			case s := <-ch:
				handle(s)
			case <-quit:
				return
			}
		}
	}()
	return func() { signal.Stop(ch); close(quit) }
}

// earlyStop is dml launch's stop request (SIGUSR1), kept by
// catchEarlyStop from the start of dml train (SIGUSR1's default action
// would end the rank): stopSignals honours one that came before training
// began, or while its own handler was being set up.
var earlyStop atomic.Pointer[os.Signal]

// catchEarlyStop catches SIGUSR1 for this run of dml train (forgetting an
// earlier run's); the function it returns stops catching it.
func catchEarlyStop() func() {
	earlyStop.Store(nil)
	return listenSignals(func(s os.Signal) { earlyStop.Store(&s) }, syscall.SIGUSR1)
}
