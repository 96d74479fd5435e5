package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dml-project/dml/collectives/watch"
	"github.com/dml-project/dml/internal/regfile"
	"github.com/dml-project/dml/trainer"
	"github.com/dml-project/dml/trainer/trace"
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
	pool, err := lf.pool()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("launch: finding this program: %w", err)
	}
	sv := &supervisor{lf: lf, pool: pool, dml: self, train: train, stdout: stdout, stderr: stderr, now: time.Now}
	return sv.run()
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

// pool builds the slots from --np or --hosts.
func (lf *launchFlags) pool() (*slotPool, error) {
	var hosts []hostSlots
	switch {
	case lf.np > 0:
		hosts = []hostSlots{{Name: "localhost", Slots: lf.np}}
	case lf.discovery != "":
		var err error
		if hosts, err = discoverHosts(lf.discovery); err != nil {
			return nil, usageErr("launch: --host-discovery: %v", err)
		}
	default:
		var err error
		if hosts, err = parseHosts(lf.hosts); err != nil {
			return nil, usageErr("launch: --hosts: %v", err)
		}
	}
	p := &slotPool{hosts: hosts, local: lf.np > 0, cooldown: lf.cooldown, out: map[string]time.Time{}, lost: map[string]int{}}
	if total := p.total(); lf.minNP > total {
		return nil, usageErr("launch: --min-np %d is more than the %d slot(s) given", lf.minNP, total)
	}
	return p, nil
}

// hostSlots is a host and its slots.
type hostSlots struct {
	Name  string `json:"host"`
	Slots int    `json:"slots"`
}

// parseHosts reads host:slots,…
func parseHosts(s string) ([]hostSlots, error) {
	var out []hostSlots
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, fmt.Errorf("%q: an empty host", s)
		}
		name, n, hasN := strings.Cut(f, ":")
		slots := 1
		if hasN {
			v, err := strconv.Atoi(n)
			if err != nil || v < 1 || v > 1<<16 {
				return nil, fmt.Errorf("%q: slots %q: want a number from 1", f, n)
			}
			slots = v
		}
		if !validHostName(name) {
			return nil, fmt.Errorf("%.80q: not a host name (letters, digits, '-' and '.', or an IPv4 address)", f)
		}
		if seen[name] {
			return nil, fmt.Errorf("host %s is given twice", name)
		}
		seen[name] = true
		out = append(out, hostSlots{name, slots})
	}
	return out, nil
}

// validHostName reports whether name is a host name as RFC 1123 writes
// them (labels of letters, digits and '-', not starting or ending with
// '-', at most 63 bytes each, 253 in all) or an IPv4 address.
func validHostName(name string) bool {
	if net.ParseIP(name) != nil && !strings.Contains(name, ":") {
		return true
	}
	if name == "" || len(name) > 253 {
		return false
	}
	for _, l := range strings.Split(name, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// maxDiscoveryBytes bounds what --host-discovery may print (10,000 hosts
// of 100 bytes): more is refused, and the command is not read further.
const maxDiscoveryBytes = 1 << 20

// cappedBuffer keeps the first max bytes written to it; a write past them
// fails, which stops the copying from the command (whose next write then
// fails: `yes` ends).
type cappedBuffer struct {
	b    []byte
	max  int
	over bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if len(c.b)+len(p) > c.max {
		c.over = true
		return 0, errors.New("output too long")
	}
	c.b = append(c.b, p...)
	return len(p), nil
}

// discoverHosts runs the discovery command and reads its hosts: one
// host[:slots] a line; empty lines and # comments are skipped.
func discoverHosts(command string) ([]hostSlots, error) {
	// Bounded: the supervisor's loop waits for it (a death, a signal).
	ctx, cancel := context.WithTimeout(context.Background(), discoveryTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.WaitDelay = time.Second
	errb := &cappedBuffer{max: 64 << 10}
	outb := &cappedBuffer{max: maxDiscoveryBytes}
	cmd.Stdout, cmd.Stderr = outb, errb
	err := cmd.Run()
	out := outb.b
	if outb.over {
		return nil, fmt.Errorf("%q printed more than %d bytes: want one host[:slots] a line", command, maxDiscoveryBytes)
	}
	if err != nil {
		msg := strings.TrimSpace(string(errb.b))
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		if msg != "" {
			msg = ": " + msg
		}
		return nil, fmt.Errorf("%q: %v%s", command, err, msg)
	}
	var fields []string
	for i, line := range strings.Split(string(out), "\n") {
		if k := strings.IndexByte(line, '#'); k >= 0 {
			line = line[:k]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.ContainsAny(line, " \t,") {
			return nil, fmt.Errorf("%q printed line %d %.80q: want host or host:slots", command, i+1, line)
		}
		if name, _, _ := strings.Cut(line, ":"); !validHostName(name) {
			return nil, fmt.Errorf("%q printed line %d %.80q: not a host name (letters, digits, '-' and '.', or an IPv4 address)", command, i+1, line)
		}
		fields = append(fields, line)
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("%q printed no host", command)
	}
	hosts, err := parseHosts(strings.Join(fields, ","))
	if err != nil {
		return nil, fmt.Errorf("%q: %v", command, err)
	}
	return hosts, nil
}

// discoveryTimeout bounds one run of --host-discovery.
const discoveryTimeout = 10 * time.Second

// slotPool is the hosts and slots a job may run on, less the ones that
// failed: on one machine (--np) a failed rank's slot is left out for good;
// with --hosts a failed rank's whole host is left out for the cool-down.
type slotPool struct {
	hosts    []hostSlots
	local    bool
	cooldown time.Duration
	out      map[string]time.Time // host → when it may come back
	lost     map[string]int       // host → slots left out for good (--np)
}

func (p *slotPool) total() int {
	n := 0
	for _, h := range p.hosts {
		n += h.Slots
	}
	return n
}

// world is the hosts to run on now, at most max ranks (0: all), in the
// order given, and their ranks.
func (p *slotPool) world(now time.Time, max int) ([]hostSlots, int) {
	var w []hostSlots
	np := 0
	for _, h := range p.hosts {
		if until, ok := p.out[h.Name]; ok {
			if now.Before(until) {
				continue
			}
			delete(p.out, h.Name)
		}
		s := h.Slots - p.lost[h.Name]
		if max > 0 {
			s = min(s, max-np)
		}
		if s <= 0 {
			continue
		}
		w = append(w, hostSlots{h.Name, s})
		np += s
	}
	return w, np
}

// hostOf is the host rank ran on in world (ranks fill the hosts in order,
// as mpirun maps them by slot), or the name the ring reported where that
// is one of the pool's.
func (p *slotPool) hostOf(world []hostSlots, rank int, reported string) string {
	if p.local {
		return p.hosts[0].Name
	}
	for _, h := range world {
		if h.Name == reported {
			return reported
		}
	}
	for _, h := range world {
		if rank < h.Slots {
			return h.Name
		}
		rank -= h.Slots
	}
	return ""
}

// rediscover replaces the hosts with what discovery reports now (the
// failed ones stay out for their cool-down).
func (p *slotPool) rediscover(hosts []hostSlots) { p.hosts = hosts }

// fail leaves host out: one slot of this machine, or the host until the
// cool-down ends.
func (p *slotPool) fail(host string, now time.Time) {
	if p.local {
		p.lost[host]++
		return
	}
	p.out[host] = now.Add(p.cooldown)
}

// launchEventPrefix starts the machine-readable lines a job under dml
// launch prints on stderr (DML_LAUNCH_EVENTS=1): one JSON object each.
const launchEventPrefix = "dml-launch: "

// launchEvents says whether this rank runs under dml launch:
// DML_LAUNCH_EVENTS is "1" (events on stderr) or tcp:HOST:PORT (events to
// dml launch's socket: mpirun forwards a remote rank's stderr through its
// daemons, which hold it back while they end a failed job, by a second
// and more).
func launchEvents() bool { return os.Getenv("DML_LAUNCH_EVENTS") != "" }

// eventConn is this rank's connection to dml launch's socket (nil: none
// yet, or stderr).
var (
	eventMu   sync.Mutex
	eventConn net.Conn
	eventDead bool // the socket failed: stderr from now on
)

// launchEvent sends one event to dml launch (when it asked for them),
// tagged with the attempt it started (DML_LAUNCH_ATTEMPT).
func launchEvent(ev map[string]any) {
	v := os.Getenv("DML_LAUNCH_EVENTS")
	if v == "" {
		return
	}
	if n, err := strconv.Atoi(os.Getenv("DML_LAUNCH_ATTEMPT")); err == nil {
		ev["attempt"] = n
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	line := append([]byte(launchEventPrefix), append(b, '\n')...)
	eventMu.Lock()
	defer eventMu.Unlock()
	if addr, ok := strings.CutPrefix(v, "tcp:"); ok && !eventDead {
		if eventConn == nil {
			eventConn, err = net.DialTimeout("tcp", addr, 2*time.Second)
		}
		if err == nil {
			eventConn.SetWriteDeadline(time.Now().Add(2 * time.Second))
			if _, err = eventConn.Write(line); err == nil {
				return
			}
		}
		eventDead = true // say it on stderr, as without a socket
	}
	os.Stderr.Write(line)
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
			launchEvent(map[string]any{"event": "emergency", "rank": rank, "steps": steps, "path": path})
		case errors.Is(err, trainer.ErrNoLastWord):
			if rank == 0 {
				fmt.Fprintf(stderr, "dml: rank %d: %v\n", rank, err)
			}
			// dml launch counts it as said: it waits for no checkpoint
			// from this rank (a ps worker holds none of the state).
			launchEvent(map[string]any{"event": "no-emergency", "rank": rank, "why": err.Error()})
		default:
			fmt.Fprintf(stderr, "dml: rank %d: %v\n", rank, err)
		}
	}
	lastWord.Store(&f)
	return func() { lastWord.Store(nil) }
}

// attempt is one run of the job, as dml launch saw it.
type attempt struct {
	Ranks int         `json:"ranks"`
	Hosts []hostSlots `json:"hosts,omitempty"`
	// Exit is the job's exit status (-1: ended by a signal).
	Exit int `json:"exit"`
	// Death is the death the ring reported (nil: none).
	Death *deathEvent `json:"death,omitempty"`
	// Emergency is the newest emergency checkpoint's steps (-1: none).
	Emergency int `json:"emergency_steps"`
	// ResumedSteps is the steps the job had run when this attempt's first
	// step began (from its first-step report; -1: it ran none).
	ResumedSteps int `json:"resumed_steps"`
	// StepsLost is the steps of work the death cost (the step in flight
	// and any completed after the checkpoint resumed from; -1: unknown).
	StepsLost int `json:"steps_lost,omitempty"`
	// RecoverySec is from the report of the death to the first step of
	// the next attempt.
	RecoverySec float64 `json:"recovery_sec,omitempty"`
	// EndSec is from the report of the death to the job's end, and
	// FirstStepSec from this attempt's start to its first step: the two
	// parts of a recovery that are not the new job's start-up.
	EndSec       float64 `json:"end_after_death_sec,omitempty"`
	FirstStepSec float64 `json:"first_step_sec,omitempty"`
	// UpSec is from this attempt's start to its ranks' world (mpirun's
	// start-up and MPI's); the rest of FirstStepSec is dml train's (the
	// data read, the model built, the resume, the first step).
	UpSec float64 `json:"up_sec,omitempty"`
	// DeathAt and FirstStepAt are when dml launch heard of the death and
	// of the first step (Unix seconds).
	DeathAt     float64 `json:"death_at,omitempty"`
	FirstStepAt float64 `json:"first_step_at,omitempty"`
	Seconds     float64 `json:"seconds"`
	LastError   string  `json:"last_error,omitempty"`

	// Grew: dml launch stopped it to start it again larger (hosts found).
	Grew string `json:"grew,omitempty"`
	// Done: the job's rank 0 finished training.
	Done bool `json:"done,omitempty"`

	start, death, firstStep time.Time
	deathLine               string
	// survivors is how many emergency checkpoints to wait for after a
	// death, said how many came; allSaid is closed when all have.
	survivors, said int
	allSaid         chan struct{}
	closed          bool // ended: events no longer taken
}

type deathEvent struct {
	Rank    int    `json:"rank"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Step    int    `json:"step"`
	Op      string `json:"op"`
	Silent  bool   `json:"silent"`
	FoundBy int    `json:"found_by"`
	// FinderStep is the step the rank that found the death was in: the
	// survivors' progress, which the dead rank's last record may lag.
	FinderStep int `json:"finder_step"`
	// Slot is the pool's host the rank ran on.
	Slot string `json:"slot_host,omitempty"`
}

// supervisor runs the job until it ends well or cannot go on.
type supervisor struct {
	lf             launchFlags
	pool           *slotPool
	dml            string
	train          *trainArgs
	stdout, stderr io.Writer
	now            func() time.Time
	attempts       []*attempt

	// discoveryFailed: a failure of --host-discovery was said.
	discoveryFailed bool
	// signalled is the first signal dml launch was sent (nil: none).
	signalled os.Signal
	// events is the address of the socket the ranks send their events
	// to ("": stderr); closeEvents closes it.
	events      string
	closeEvents func()
	// mu guards the attempt under way against its event reader.
	mu sync.Mutex
}

func (sv *supervisor) printf(format string, a ...any) {
	fmt.Fprintf(sv.stderr, "dml launch: "+format+"\n", a...)
}

func (sv *supervisor) run() error {
	if tl := sv.timeline(); tl != "" { // an earlier launch's attempts are not this one's
		for _, f := range attemptFiles(tl) {
			os.Remove(f)
		}
	}
	if sv.listenEvents(); sv.closeEvents != nil {
		defer sv.closeEvents()
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	restarts := 0
	for {
		world, np := sv.pool.world(sv.now(), sv.lf.maxNP)
		if np < sv.lf.minNP {
			err := fmt.Errorf("launch: %d rank(s) left, below --min-np %d: giving up%s", np, sv.lf.minNP, sv.lastError())
			sv.finish(err)
			return err
		}
		args := sv.command(world, np, len(sv.attempts))
		a := &attempt{Ranks: np, Emergency: -1, ResumedSteps: -1, start: sv.now()}
		if !sv.pool.local {
			a.Hosts = world
		}
		if len(sv.attempts) == 0 {
			sv.printf("starting %d rank(s): %s", np, strings.Join(args, " "))
		}
		sv.mu.Lock()
		sv.attempts = append(sv.attempts, a)
		sv.mu.Unlock()
		interrupted, err := sv.runOnce(a, args, sigs)
		a.Seconds = sv.now().Sub(a.start).Seconds()
		if err == nil || a.Done && a.Grew != "" { // grown too late: it had finished
			sv.finish(nil)
			return nil
		}
		a.LastError = err.Error()
		if a.Death != nil {
			a.EndSec = sv.now().Sub(a.death).Seconds()
		}
		var le launcherError
		switch {
		case errors.As(err, &le):
			sv.finish(err)
			return err
		case interrupted:
			sv.finish(err)
			return exitCode{exitStatus(sv.signalled), err}
		case a.Grew != "" && a.Death == nil:
			continue // stopped to take hosts in: not a failure
		case a.Death == nil && a.Exit == 2:
			// The job refused its input: a restart would too.
			sv.finish(err)
			return reported{usageErr("%v", err)}
		case a.Death == nil && a.Grew == "" && a.Exit >= 0 && a.Exit < 128:
			// Not a death (the ring named none, no rank was killed by a
			// signal): a failure of the training itself (a non-finite
			// loss, a file gone), which a restart would meet again.
			err := fmt.Errorf("launch: the job failed without losing a rank: not restarted: %s", a.LastError)
			sv.finish(err)
			return err
		case restarts >= sv.lf.maxRestarts:
			err := fmt.Errorf("launch: the job failed again after %d restart(s) (--max-restarts %d): giving up: %s", restarts, sv.lf.maxRestarts, a.LastError)
			sv.finish(err)
			return err
		}
		restarts++
		if d := a.Death; d != nil && d.Slot != "" {
			sv.pool.fail(d.Slot, sv.now())
		}
	}
}

// discovered is one run of --host-discovery's outcome.
type discovered struct {
	hosts []hostSlots
	err   error
}

// discover runs the discovery command apart from the supervisor's loop
// (which goes on handling signals and deaths meanwhile: a command that
// hangs held them up to its 10 s bound, issue 29) and sends what it found.
func (sv *supervisor) discover(found chan<- discovered) {
	go func() {
		hosts, err := discoverHosts(sv.lf.discovery)
		found <- discovered{hosts, err}
	}()
}

// rediscovered takes in what a run of discovery found (a failure is said
// once, and the hosts known are kept).
func (sv *supervisor) rediscovered(d discovered) {
	if d.err != nil {
		if !sv.discoveryFailed {
			sv.printf("--host-discovery: %v: keeping the hosts known (said once)", d.err)
		}
		sv.discoveryFailed = true
		return
	}
	sv.pool.rediscover(d.hosts)
}

// mayGrow reports whether attempt a may be grown: it trains and is not
// stopping (interrupted: dml launch was asked to stop).
func (sv *supervisor) mayGrow(a *attempt, interrupted bool) bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return !interrupted && a.Grew == "" && a.Death == nil && a.ResumedSteps >= 0
}

// grow asks a's job to stop at the next step boundary, to be started again
// larger, when it may grow and there is growth to take in.
func (sv *supervisor) grow(a *attempt, cmd *exec.Cmd, interrupted bool) {
	if !sv.mayGrow(a, interrupted) {
		return
	}
	if why := sv.growth(a); why != "" {
		a.Grew = why
		sv.printf("%s to take in: stopping the job at the next step boundary to start it again larger", why)
		cmd.Process.Signal(stopSignal)
	}
}

// growth says why the job should be started again larger (hosts found by
// discovery, or back from their cool-down), "" if not.
func (sv *supervisor) growth(a *attempt) string {
	world, np := sv.pool.world(sv.now(), sv.lf.maxNP)
	if np <= a.Ranks {
		return ""
	}
	var names []string
	for _, h := range world {
		if !slices.ContainsFunc(a.Hosts, func(o hostSlots) bool { return o.Name == h.Name }) {
			names = append(names, h.Name)
		}
	}
	why := fmt.Sprintf("%d slot(s) more", np-a.Ranks)
	if len(names) > 0 {
		why += " (" + strings.Join(names, ", ") + ")"
	}
	return why
}

// lastError is ": " and the last attempt's error, if any.
func (sv *supervisor) lastError() string {
	if n := len(sv.attempts); n > 0 && sv.attempts[n-1].LastError != "" {
		return ": the job's last error: " + sv.attempts[n-1].LastError
	}
	return ""
}

// command is the launcher's command line for world, the attempt-th
// (from 0: the later ones resume).
func (sv *supervisor) command(world []hostSlots, np int, attempt int) []string {
	var hs []string
	for _, h := range world {
		hs = append(hs, fmt.Sprintf("%s:%d", h.Name, h.Slots))
	}
	hostList := strings.Join(hs, ",")
	launcher := strings.Fields(sv.lf.launcher)
	if len(launcher) == 0 {
		launcher = []string{"mpirun", "--oversubscribe"}
		if os.Geteuid() == 0 {
			launcher = append(launcher, "--allow-run-as-root")
		}
	}
	var out []string
	hasNP, hasHosts := false, false
	for _, a := range launcher {
		if strings.Contains(a, "{np}") {
			a, hasNP = strings.ReplaceAll(a, "{np}", strconv.Itoa(np)), true
		}
		if strings.Contains(a, "{hosts}") {
			a, hasHosts = strings.ReplaceAll(a, "{hosts}", hostList), true
		}
		out = append(out, a)
	}
	if b := filepath.Base(launcher[0]); b == "mpirun" || b == "mpiexec" || b == "orterun" {
		out = append(out, "-x", "DML_LAUNCH_EVENTS", "-x", "DML_LAUNCH_ATTEMPT")
	}
	if !hasNP {
		out = append(out, "-np", strconv.Itoa(np))
	}
	if !hasHosts && !sv.pool.local {
		out = append(out, "--host", hostList)
	}
	out = append(out, sv.dml)
	train := sv.train
	if sv.lf.liveness > 0 && !train.has("liveness") {
		train = train.with("liveness", sv.lf.liveness.String())
	}
	if !train.has("data-cache") { // a restart reads the data inflated already
		ck, _ := train.value("checkpoint-dir")
		train = train.with("data-cache", filepath.Join(ck, "data-cache"))
	}
	if tl := sv.timeline(); tl != "" { // each attempt's own; finish concatenates them
		train = train.with("timeline", attemptTimeline(tl, attempt))
	}
	if attempt > 0 {
		// A restart resumes from the newest checkpoint in
		// --checkpoint-dir, whatever --resume the first run had (a file,
		// or false).
		train = train.with("resume", "true")
	}
	return append(out, train.args()...)
}

// stopSignal asks the job to stop at the next step boundary: mpirun
// passes SIGUSR1 on to every rank at once (SIGTERM only after a second,
// with SIGKILL a second later), and dml train stops on it as on SIGTERM.
const stopSignal = syscall.SIGUSR1

// endGrace is how long dml launch lets mpirun end a job by itself once
// every survivor of a death has written its emergency checkpoint.
const endGrace = 100 * time.Millisecond

// launcherError: the launcher could not be started (not a job failure).
type launcherError struct{ error }

func (e launcherError) Unwrap() error { return e.error }

// exitCode is an error that ends dml launch with a status of its own.
type exitCode struct {
	code int
	err  error
}

func (e exitCode) Error() string { return e.err.Error() }
func (e exitCode) Unwrap() error { return e.err }

// runOnce runs one attempt, passing the job's output through and reading
// its events; interrupted says dml launch itself was asked to stop.
func (sv *supervisor) runOnce(a *attempt, args []string, sigs chan os.Signal) (interrupted bool, err error) {
	cmd, pr, err := sv.startJob(args)
	if err != nil {
		return false, err
	}
	var lastLine string
	read := sv.relay(pr, a, &lastLine)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	interrupted, werr := sv.watch(a, cmd, sigs, waited)
	sv.mu.Lock()
	dead := a.Death != nil
	sv.mu.Unlock()
	if !dead { // what the job printed last, for its error (a daemon may hold the pipe)
		select {
		case <-read:
		case <-time.After(500 * time.Millisecond):
		}
	}
	sv.mu.Lock()
	last := lastLine
	a.closed = true // a daemon's late lines are not this attempt's any more
	sv.mu.Unlock()
	if werr == nil {
		return interrupted, nil
	}
	a.Exit = -1
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		a.Exit = ee.ExitCode()
	}
	switch {
	case a.deathLine != "":
		last = a.deathLine
	case last == "":
		last = fmt.Sprintf("%s: %v", args[0], werr)
	}
	return interrupted, errors.New(last)
}

// startJob starts the job's command line args with the ranks' stderr
// through the pipe it returns.
func (sv *supervisor) startJob(args []string) (*exec.Cmd, *os.File, error) {
	cmd := exec.Command(args[0], args[1:]...)
	events := "1"
	if sv.events != "" {
		events = "tcp:" + sv.events
	}
	cmd.Env = append(os.Environ(), "DML_LAUNCH_EVENTS="+events, fmt.Sprintf("DML_LAUNCH_ATTEMPT=%d", len(sv.attempts)-1))
	cmd.Stdout = sv.stdout
	// A process group of its own: a terminal's Ctrl-C reaches dml launch
	// alone, which asks the job to stop cleanly (mpirun would kill the
	// ranks at once on SIGINT).
	// And the job's life is tied to launch's: killed (kill -9), launch
	// cannot stop it, so the launcher gets SIGTERM — mpirun passes it to
	// the ranks, which stop at their next step boundary with a checkpoint
	// — instead of running on unsupervised (issue 29).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	// The ranks' stderr through a pipe of our own (not exec's copying
	// goroutine, which Wait waits for): the daemons mpirun starts on other
	// hosts hold its write end until they end, seconds after mpirun
	// itself once a job failed, and the restart need not wait for them.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, launcherError{fmt.Errorf("launch: %w", err)}
	}
	cmd.Stderr = pw
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, nil, launcherError{fmt.Errorf("launch: starting %s: %w", args[0], err)}
	}
	return cmd, pr, nil
}

// relay copies the job's stderr (pr) to dml launch's, routing the launch
// events in it to attempt a and keeping the last "dml: " line in
// *lastLine (under sv.mu); the channel closes when the pipe ends.
func (sv *supervisor) relay(pr *os.File, a *attempt, lastLine *string) <-chan struct{} {
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if ev, ok := strings.CutPrefix(line, launchEventPrefix); ok {
				sv.routeEvent(ev, a)
				continue
			}
			if strings.HasPrefix(line, "mpirun: Forwarding signal") {
				continue // dml launch's own stop request
			}
			fmt.Fprintln(sv.stderr, line)
			if strings.HasPrefix(line, "dml: ") && !strings.Contains(line, ": stopping at the next step boundary") {
				sv.mu.Lock()
				*lastLine = strings.TrimPrefix(line, "dml: ")
				sv.mu.Unlock()
			}
		}
		io.Copy(io.Discard, pr)
		pr.Close()
	}()
	return read
}

// watch supervises the running attempt a until its command ends (waited):
// growing the job where hosts allow, passing signals on as stop requests,
// ending the job once every survivor has said its last word. It returns
// whether a signal interrupted it, and the command's end.
func (sv *supervisor) watch(a *attempt, cmd *exec.Cmd, sigs chan os.Signal, waited <-chan error) (interrupted bool, werr error) {
	sv.mu.Lock()
	allSaid := make(chan struct{})
	a.allSaid = allSaid
	sv.mu.Unlock()
	var ending <-chan time.Time
	nsig := 0
	var poll <-chan time.Time
	if !sv.pool.local {
		t := time.NewTicker(sv.lf.discoverEvery)
		defer t.Stop()
		poll = t.C
	}
	// found: discovery's outcome (one run at a time; buffered, so that a
	// run still going when the attempt ends does not block).
	found, discovering := make(chan discovered, 1), false
	for done := false; !done; {
		select {
		case <-poll:
			switch {
			case sv.lf.discovery == "":
				sv.grow(a, cmd, interrupted)
			case !discovering && sv.mayGrow(a, interrupted): // no discovery while it could not grow anyway
				discovering = true
				sv.discover(found)
			}
		case d := <-found:
			discovering = false
			sv.rediscovered(d)
			sv.grow(a, cmd, interrupted)
		case s := <-sigs:
			// The first signal: SIGUSR1, which mpirun passes on to the
			// ranks at once, and they stop at the next step boundary with
			// a checkpoint; the second: SIGTERM (mpirun ends the ranks);
			// the third: SIGKILL to the job's process group.
			nsig++
			switch nsig {
			case 1:
				sv.signalled = s
				sv.printf("%v: asking the job to stop at the next step boundary (again to end it now)", s)
				cmd.Process.Signal(stopSignal)
			case 2:
				sv.printf("%v again: ending the job", s)
				cmd.Process.Signal(syscall.SIGTERM)
			default:
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
			interrupted = true
		case <-allSaid:
			// Every survivor has written its last word and is ending;
			// mpirun may take seconds more to end the job on other hosts
			// (its kill sequence waits odls_base_sigkill_timeout, twice):
			// a moment for it, then the job's process group is killed.
			allSaid = nil
			ending = time.After(endGrace)
		case <-ending:
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case werr = <-waited:
			done = true
		}
	}
	return interrupted, werr
}

// listenEvents opens dml launch's socket for the ranks' events, on the
// address this machine reaches the first host from (loopback with --np);
// "" where it cannot (the ranks then print them on stderr).
func (sv *supervisor) listenEvents() {
	ip := "127.0.0.1"
	if !sv.pool.local && len(sv.pool.hosts) > 0 {
		c, err := net.Dial("udp", net.JoinHostPort(sv.pool.hosts[0].Name, "9"))
		if err != nil {
			return
		}
		ip = c.LocalAddr().(*net.UDPAddr).IP.String()
		c.Close()
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return
	}
	sv.events = ln.Addr().String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if ev, ok := strings.CutPrefix(sc.Text(), launchEventPrefix); ok {
						sv.routeEvent(ev, nil)
					}
				}
			}()
		}
	}()
	sv.closeEvents = func() { ln.Close() }
}

// routeEvent hands an event line to the attempt it names (else to a).
func (sv *supervisor) routeEvent(line string, a *attempt) {
	var head struct {
		Attempt *int `json:"attempt"`
	}
	if json.Unmarshal([]byte(line), &head) == nil && head.Attempt != nil {
		sv.mu.Lock()
		if n := *head.Attempt; n >= 0 && n < len(sv.attempts) {
			a = sv.attempts[n]
		}
		sv.mu.Unlock()
	}
	if a != nil {
		sv.event(a, line)
	}
}

// event takes one event line of attempt a.
func (sv *supervisor) event(a *attempt, line string) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if a.closed {
		return
	}
	var head struct {
		Event string `json:"event"`
		Steps int    `json:"steps"`
	}
	if json.Unmarshal([]byte(line), &head) != nil {
		return
	}
	now := sv.now()
	switch head.Event {
	case "death":
		var d deathEvent
		if json.Unmarshal([]byte(line), &d) != nil || a.Death != nil {
			return
		}
		world := a.Hosts
		if sv.pool.local {
			world = sv.pool.hosts
		}
		d.Slot = sv.pool.hostOf(world, d.Rank, d.Host)
		a.Death, a.death = &d, now
		a.DeathAt = float64(now.UnixNano()) / 1e9
		a.deathLine = fmt.Sprintf("rank %d (pid %d, host %s) died in %s", d.Rank, d.PID, d.Host, d.Op)
		// The ranks that can say their last word: all but the dead host's
		// (one slot of this machine).
		a.survivors = a.Ranks - 1
		for _, h := range a.Hosts {
			if h.Name == d.Slot {
				a.survivors = a.Ranks - h.Slots
			}
		}
		fallthrough // an emergency event may have come first
	case "emergency", "no-emergency":
		switch head.Event {
		case "emergency":
			a.Emergency = max(a.Emergency, head.Steps)
			a.said++
		case "no-emergency": // a survivor with nothing to write
			a.said++
		}
		if a.Death != nil && a.survivors > 0 && a.said >= a.survivors && a.allSaid != nil {
			close(a.allSaid)
			a.allSaid = nil
		}
	case "done":
		a.Done = true
	case "up":
		a.UpSec = now.Sub(a.start).Seconds()
	case "first-step":
		if a.ResumedSteps >= 0 {
			return
		}
		a.ResumedSteps, a.firstStep = head.Steps-1, now
		a.FirstStepSec = now.Sub(a.start).Seconds()
		a.FirstStepAt = float64(now.UnixNano()) / 1e9
		// The attempt whose end this one recovers from: the last before
		// it that ran a step (the ones between failed before their first).
		for i := len(sv.attempts) - 2; i >= 0; i-- {
			if p := sv.attempts[i]; p.ResumedSteps >= 0 || i == 0 {
				sv.restarted(p, a)
				break
			}
		}
	}
}

// restarted prints the line of a restart: prev failed, a has stepped.
func (sv *supervisor) restarted(prev, a *attempt) {
	if prev.Grew != "" && prev.Death == nil {
		prev.RecoverySec = a.firstStep.Sub(prev.start.Add(time.Duration(prev.Seconds * float64(time.Second)))).Seconds()
		sv.printf("grew: %d rank(s) go on from step %d (the checkpoint of the stop), %.1f s from the old job's end to the first step", a.Ranks, a.ResumedSteps, prev.RecoverySec)
		return
	}
	who := fmt.Sprintf("the job failed (%s)", prev.LastError)
	if d := prev.Death; d != nil {
		// The step in flight: the dead rank's last report may be a step
		// or more old (it reports four times a second, and a rank waiting
		// on others reports the step it waits in); the survivors' step
		// when one found the death and their emergency checkpoints say
		// how far the job had come. What is lost is what the next attempt
		// does again.
		inflight := max(d.Step, d.FinderStep)
		if prev.Emergency >= 0 {
			inflight = max(inflight, prev.Emergency+1)
		}
		lost := max(0, inflight-a.ResumedSteps)
		lostWords := fmt.Sprintf("%d step(s) lost", lost)
		if inflight <= 0 {
			// Killed before its first status report and without an
			// emergency checkpoint: how far it had come is not known.
			lost, lostWords = -1, "steps lost unknown"
		}
		prev.StepsLost = lost
		prev.RecoverySec = a.firstStep.Sub(prev.death).Seconds()
		where := d.Host
		if where == "" {
			where = d.Slot
		}
		who = fmt.Sprintf("rank %d on %s died in step %d (last heard of in step %d)", d.Rank, where, inflight, d.Step)
		if inflight <= 0 {
			who = fmt.Sprintf("rank %d on %s died (last heard of in %s)", d.Rank, where, d.Op)
		}
		from := "its last checkpoint"
		if prev.Emergency >= 0 && prev.Emergency == a.ResumedSteps {
			from = "the survivors' emergency checkpoint"
		}
		sv.printf("restart %d: %s; %d rank(s) go on from step %d (%s), %s, recovered in %.1f s",
			len(sv.attempts)-1, who, a.Ranks, a.ResumedSteps, from, lostWords, prev.RecoverySec)
		return
	}
	prev.RecoverySec = a.firstStep.Sub(prev.start.Add(time.Duration(prev.Seconds * float64(time.Second)))).Seconds()
	sv.printf("restart %d: %s; %d rank(s) go on from step %d, recovered in %.1f s", len(sv.attempts)-1, who, a.Ranks, a.ResumedSteps, prev.RecoverySec)
}

// finish prints the summary and writes --report.
func (sv *supervisor) finish(err error) {
	if tl := sv.timeline(); tl != "" {
		if e := concatTimelines(tl, len(sv.attempts)); e != nil {
			sv.printf("--timeline: %v", e)
		}
	}
	restarts, grown := 0, 0
	for _, a := range sv.attempts[:max(0, len(sv.attempts)-1)] {
		if a.Grew != "" && a.Death == nil {
			grown++
		} else {
			restarts++
		}
	}
	lost, rec := 0, []string{}
	unknown := false
	for _, a := range sv.attempts[:max(0, len(sv.attempts)-1)] {
		if a.StepsLost < 0 {
			unknown = true
		}
		lost += max(0, a.StepsLost)
		if a.RecoverySec > 0 {
			rec = append(rec, fmt.Sprintf("%.1f s", a.RecoverySec))
		}
	}
	if restarts+grown > 0 || err != nil {
		how := "done"
		if err != nil {
			how = "stopped"
		}
		recovery := ""
		if len(rec) > 0 {
			recovery = ", recovery " + strings.Join(rec, ", ")
		}
		grew := ""
		if grown > 0 {
			grew = fmt.Sprintf(" and %d time(s) grown", grown)
		}
		lostWords := fmt.Sprintf("%d step(s) of work lost in all", lost)
		if unknown {
			lostWords = fmt.Sprintf("at least %d step(s) of work lost in all (one restart's unknown)", lost)
		}
		sv.printf("%s after %d restart(s)%s: %s%s", how, restarts, grew, lostWords, recovery)
	}
	if sv.lf.report == "" {
		return
	}
	rep := struct {
		OK        bool       `json:"ok"`
		Error     string     `json:"error,omitempty"`
		Restarts  int        `json:"restarts"`
		Grown     int        `json:"grown"`
		StepsLost int        `json:"steps_lost"`
		Attempts  []*attempt `json:"attempts"`
	}{err == nil, "", restarts, grown, lost, sv.attempts}
	if err != nil {
		rep.Error = err.Error()
	}
	b, _ := json.MarshalIndent(rep, "", " ")
	if werr := regfile.WriteFile(sv.lf.report, append(b, '\n')); werr != nil {
		sv.printf("--report: %v", werr)
	}
}

// timeline is the training command's --timeline ("": none).
func (sv *supervisor) timeline() string {
	v, _ := sv.train.value("timeline")
	return v
}

// attemptTimeline is attempt k's --timeline: FILE.attempt-K.json (a
// failed attempt's ranks write FILE.attempt-K.json.rank-N.json).
func attemptTimeline(file string, k int) string { return fmt.Sprintf("%s.attempt-%d.json", file, k) }

// attemptFiles lists the files an earlier launch with this --timeline
// left: FILE.attempt-K.json and FILE.attempt-K.json.rank-N.json, matched
// by name exactly — never through a glob of the user's text, whose [ ] *
// ? would name other files (issue 29).
func attemptFiles(file string) []string {
	var out []string
	for _, f := range numbered(file, ".attempt-", ".json") {
		out = append(out, f)
		out = append(out, numbered(f, ".rank-", ".json")...)
	}
	return out
}

// numbered lists the files of file's folder named file's base name, then
// infix, a decimal number, then suffix, as paths beside file.
func numbered(file, infix, suffix string) []string {
	dir, base := filepath.Split(file)
	ents, err := os.ReadDir(filepath.Clean(dir + "."))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), base+infix)
		if !ok {
			continue
		}
		num, ok := strings.CutSuffix(rest, suffix)
		if ok && num != "" && strings.Trim(num, "0123456789") == "" {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// concatTimelines writes file, the job's timeline across its attempts
// (trace.ConcatAttempts): each attempt's merged timeline or, for one that
// failed, its ranks' own. An attempt that left none is left out.
func concatTimelines(file string, attempts int) error {
	var traces []trace.AttemptTrace
	for k := range attempts {
		name := attemptTimeline(file, k)
		files := []string{name}
		if _, err := os.Stat(name); err != nil {
			files = numbered(name, ".rank-", ".json")
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			traces = append(traces, trace.AttemptTrace{Attempt: k, JSON: b})
		}
	}
	if len(traces) == 0 {
		return fmt.Errorf("no attempt wrote a timeline (%s)", attemptTimeline(file, 0))
	}
	var buf bytes.Buffer
	if err := trace.ConcatAttempts(&buf, traces); err != nil {
		return err
	}
	return regfile.WriteFile(file, buf.Bytes())
}
