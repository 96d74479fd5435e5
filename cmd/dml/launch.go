package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dml-project/dml/collectives/watch"
	"github.com/dml-project/dml/internal/elastic"
	"github.com/dml-project/dml/trainer"
)

const launchUsage = `dml launch — run dml train under a supervisor that relaunches it on the
surviving ranks when one dies

Usage:
  dml launch --np N [--min-np M] [--max-restarts K] -- train [train flags]
  dml launch --hosts h1:2,h2:2,h3:2 [--min-np M] [--max-np N] -- train [train flags]

It starts the job with --launcher (mpirun by default) and watches it. When
the liveness ring reports a rank dead, every survivor writes the state of
its last completed step into --checkpoint-dir (--emergency-checkpoint), the
job ends, and dml launch leaves the dead rank's slot out (with --hosts: its
whole host, for --cooldown) and starts the job again on what is left, with
--resume: the rest of the epoch is dealt to the ranks that go on (--sync
allreduce and dpsgd, and ps under bsp, resume on another number of ranks).
Each restart is one line: who died, at which step, how many ranks go on,
the steps lost and how long the recovery took. It gives up when fewer than
--min-np ranks would remain, after --max-restarts restarts, or when the job
fails on its input (exit 2), with the job's last error.

The training command needs --checkpoint-dir (the restarts resume from it).`

// launchFlags are dml launch's settings.
type launchFlags struct {
	np, minNP, maxNP, maxRestarts int
	hosts, launcher, report       string
	discovery                     string
	cooldown, discoverEvery       time.Duration
	liveness                      time.Duration
}

func cmdLaunch(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("launch", launchUsage, stdout)
	var lf launchFlags
	fs.IntVar(&lf.np, "np", 0, "ranks on this machine (its slots); or give --hosts")
	fs.StringVar(&lf.hosts, "hosts", "", "hosts and their slots, host:slots,… (e.g. h1:2,h2:2); a host without :slots has one")
	fs.IntVar(&lf.minNP, "min-np", 1, "go on only with at least this many ranks")
	fs.IntVar(&lf.maxNP, "max-np", 0, "run at most this many ranks (0: every slot)")
	fs.IntVar(&lf.maxRestarts, "max-restarts", 3, "give up after this many restarts")
	fs.DurationVar(&lf.cooldown, "cooldown", 10*time.Minute, "with --hosts: how long a host that failed stays out (it may come back at a later restart)")
	fs.StringVar(&lf.launcher, "launcher", "", "the command that starts the job (default: mpirun --oversubscribe, --allow-run-as-root as root); {np} and {hosts} in it are replaced, else mpirun's -np and --host are appended")
	fs.StringVar(&lf.discovery, "host-discovery", "", "a shell command that prints the hosts to run on, one host[:slots] a line (# comments): run at the start and every --discover-every; a host it reports anew (or one back from its cool-down) is taken in at the next step boundary (the job stops there with a checkpoint and is started again, larger)")
	fs.DurationVar(&lf.discoverEvery, "discover-every", 5*time.Second, "with --host-discovery, or hosts in their cool-down: how often to look for hosts to take in")
	fs.DurationVar(&lf.liveness, "liveness", time.Second, "dml train's --liveness, unless the training command gives it: a rank silent this long (its status comes four times a second) is dead (a host or its link gone, or a rank stopped or starved of CPU that long), so that the job goes on without it; raise it where ranks may stall longer (0: dml train's own rule, --timeout + 10 s)")
	fs.StringVar(&lf.report, "report", "", "write a JSON report of every attempt (who failed, at which step, steps lost, recovery time) to this file")
	if err := fs.Parse(joinSpaced(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			helps[fs]()
			return err
		}
		return usageErr("launch: %v (see 'dml launch --help')", err)
	}
	train, err := lf.check(fs.Args())
	if err != nil {
		return err
	}
	hosts, err := lf.slots()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("launch: finding this program: %w", err)
	}
	err = elastic.New(elastic.Config{
		Hosts: hosts, Local: lf.np > 0, Cooldown: lf.cooldown,
		Discovery: lf.discovery, DiscoverEvery: lf.discoverEvery,
		MinNP: lf.minNP, MaxNP: lf.maxNP, MaxRestarts: lf.maxRestarts,
		Launcher: lf.launcher, Report: lf.report,
		Program: self, Job: launchJob{train, lf.liveness},
		Stdout: stdout, Stderr: stderr,
	}).Run()
	var in *elastic.Interrupted
	switch {
	case errors.As(err, &in):
		return exitCode{exitStatus(in.Signal), err}
	case errors.As(err, new(*elastic.Refused)):
		return reported{usageErr("%v", err)} // its ranks said why
	}
	return err
}

// launchJob is dml train's command line as dml launch runs it.
type launchJob struct {
	train    *trainArgs
	liveness time.Duration // --liveness unless the command gives it (0: none)
}

// Args is the training command of the attempt-th run: launch's
// --liveness where the command has none, the data cache in the checkpoint
// folder (a restart reads the data inflated already), the attempt's own
// timeline, and --resume from the second attempt on.
func (j launchJob) Args(attempt int, timeline string) []string {
	train := j.train
	if j.liveness > 0 && !train.has("liveness") {
		train = train.with("liveness", j.liveness.String())
	}
	if !train.has("data-cache") {
		ck, _ := train.value("checkpoint-dir")
		train = train.with("data-cache", filepath.Join(ck, "data-cache"))
	}
	if timeline != "" {
		train = train.with("timeline", timeline)
	}
	if attempt > 0 {
		// A restart resumes from the newest checkpoint in
		// --checkpoint-dir, whatever --resume the first run had (a file,
		// or false).
		train = train.with("resume", "true")
	}
	return train.args()
}

// Timeline is the training command's --timeline ("": none).
func (j launchJob) Timeline() string {
	v, _ := j.train.value("timeline")
	return v
}

// check refuses what cannot run: the command after --, the counts; it
// returns the training command parsed.
func (lf *launchFlags) check(train []string) (*trainArgs, error) {
	switch {
	case len(train) == 0:
		return nil, usageErr("launch: nothing to run: give the training command after --, e.g. dml launch --np 3 -- train --checkpoint-dir ck …")
	case train[0] != "train":
		return nil, usageErr("launch: %q: dml launch supervises dml train (give -- train [flags])", train[0])
	case lf.np == 0 && lf.hosts == "" && lf.discovery == "":
		return nil, usageErr("launch: give --np N (ranks on this machine), --hosts h1:2,h2:2 or --host-discovery CMD")
	case (lf.np != 0) && (lf.hosts != "" || lf.discovery != "") || lf.hosts != "" && lf.discovery != "":
		return nil, usageErr("launch: give one of --np, --hosts and --host-discovery")
	case lf.liveness < 0 || lf.liveness > 0 && lf.liveness < minLiveness:
		return nil, usageErr("launch: --liveness %v: want 0 or at least %v", lf.liveness, minLiveness)
	case lf.discoverEvery <= 0:
		return nil, usageErr("launch: --discover-every %v: want a positive duration", lf.discoverEvery)
	case lf.np < 0:
		return nil, usageErr("launch: --np %d: want at least 1 rank", lf.np)
	case lf.minNP < 1:
		return nil, usageErr("launch: --min-np %d: want at least 1", lf.minNP)
	case lf.maxNP < 0:
		return nil, usageErr("launch: --max-np %d: want 0 (every slot) or more", lf.maxNP)
	case lf.maxNP > 0 && lf.maxNP < lf.minNP:
		return nil, usageErr("launch: --max-np %d is below --min-np %d", lf.maxNP, lf.minNP)
	case lf.maxRestarts < 0:
		return nil, usageErr("launch: --max-restarts %d: want 0 or more", lf.maxRestarts)
	case lf.cooldown < 0:
		return nil, usageErr("launch: --cooldown %v: want 0 or more", lf.cooldown)
	}
	ta, err := parseTrainArgs(train[1:])
	if err != nil {
		return nil, usageErr("launch: the training command: %s", strings.TrimPrefix(message(err), "train: "))
	}
	if v, _ := ta.value("checkpoint-dir"); v == "" {
		return nil, usageErr("launch: the training command needs --checkpoint-dir DIR: a restart resumes from it")
	}
	// Launch's own outputs, checked before anything runs (issue 29: a
	// FIFO hung launch after the job, a folder lost the report at the end).
	if err := checkOutputDir(lf.report); err != nil {
		return nil, usageErr("launch: --report %s: %v", lf.report, err)
	}
	if v, _ := ta.value("timeline"); v != "" {
		if err := checkOutputDir(v); err != nil {
			return nil, usageErr("launch: the training command's --timeline %s: %v", v, err)
		}
	}
	// The strategy says whether its ranks share step boundaries, where a
	// restart's emergency checkpoint and a stop are taken (adpsgd's do
	// not), not its name here.
	if !ta.cfg.StopsAtBoundaries() {
		return nil, usageErr("launch: --sync %s cannot be stopped at a step boundary and checkpoints only at its synchronisation points: dml launch does not run it (resume it with dml train --resume)", ta.cfg.Sync)
	}
	if v, ok := ta.value("emergency-checkpoint"); ok && v == "false" {
		fmt.Fprintln(os.Stderr, "dml launch: --emergency-checkpoint=false: a restart goes back to the last scheduled checkpoint")
	}
	return ta, nil
}

// slots are the hosts and slots from --np, --host-discovery or --hosts.
func (lf *launchFlags) slots() ([]elastic.Host, error) {
	var hosts []elastic.Host
	switch {
	case lf.np > 0:
		hosts = []elastic.Host{{Name: "localhost", Slots: lf.np}}
	case lf.discovery != "":
		var err error
		if hosts, err = elastic.DiscoverHosts(lf.discovery); err != nil {
			return nil, usageErr("launch: --host-discovery: %v", err)
		}
	default:
		var err error
		if hosts, err = elastic.ParseHosts(lf.hosts); err != nil {
			return nil, usageErr("launch: --hosts: %v", err)
		}
	}
	if total := elastic.Slots(hosts); lf.minNP > total {
		return nil, usageErr("launch: --min-np %d is more than the %d slot(s) given", lf.minNP, total)
	}
	return hosts, nil
}

// keepLastWord sets the liveness ring's last word to tr's emergency
// checkpoint while tr trains, followed by then (nil: nothing; dml train's
// timeline of this rank); the function it returns unsets it.
func keepLastWord(rank int, tr *trainer.Trainer, stderr io.Writer, then func()) func() {
	f := func(d watch.Death) {
		path, steps, err := tr.LastWord(trainer.Emergency{DeadRank: d.Rank, DeadHost: d.Host, FoundBy: d.By})
		if then != nil {
			then() // before the event: dml launch ends the job once every survivor has said
		}
		switch {
		case err == nil:
			fmt.Fprintf(stderr, "dml: rank %d: emergency checkpoint of step %d, the last this rank completed: %s\n", rank, steps, path)
			elastic.Send(map[string]any{"event": "emergency", "rank": rank, "steps": steps, "path": path})
		case errors.Is(err, trainer.ErrNoLastWord):
			if rank == 0 {
				fmt.Fprintf(stderr, "dml: rank %d: %v\n", rank, err)
			}
			// dml launch counts it as said: it waits for no checkpoint
			// from this rank (a ps worker holds none of the state).
			elastic.Send(map[string]any{"event": "no-emergency", "rank": rank, "why": err.Error()})
		default:
			fmt.Fprintf(stderr, "dml: rank %d: %v\n", rank, err)
		}
	}
	lastWord.Store(&f)
	return func() { lastWord.Store(nil) }
}
