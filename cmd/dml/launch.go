package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dml-project/dml/collectives/watch"
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
	cooldown                      time.Duration
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
	fs.StringVar(&lf.report, "report", "", "write a JSON report of every attempt (who failed, at which step, steps lost, recovery time) to this file")
	if err := fs.Parse(joinSpaced(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			helps[fs]()
			return err
		}
		return usageErr("launch: %v (see 'dml launch --help')", err)
	}
	train := fs.Args()
	if err := lf.check(train); err != nil {
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

// check refuses what cannot run: the command after --, the counts.
func (lf *launchFlags) check(train []string) error {
	switch {
	case len(train) == 0:
		return usageErr("launch: nothing to run: give the training command after --, e.g. dml launch --np 3 -- train --checkpoint-dir ck …")
	case train[0] != "train":
		return usageErr("launch: %q: dml launch supervises dml train (give -- train [flags])", train[0])
	case lf.np == 0 && lf.hosts == "":
		return usageErr("launch: give --np N (ranks on this machine) or --hosts h1:2,h2:2")
	case lf.np != 0 && lf.hosts != "":
		return usageErr("launch: give --np or --hosts, not both")
	case lf.np < 0:
		return usageErr("launch: --np %d: want at least 1 rank", lf.np)
	case lf.minNP < 1:
		return usageErr("launch: --min-np %d: want at least 1", lf.minNP)
	case lf.maxNP < 0:
		return usageErr("launch: --max-np %d: want 0 (every slot) or more", lf.maxNP)
	case lf.maxNP > 0 && lf.maxNP < lf.minNP:
		return usageErr("launch: --max-np %d is below --min-np %d", lf.maxNP, lf.minNP)
	case lf.maxRestarts < 0:
		return usageErr("launch: --max-restarts %d: want 0 or more", lf.maxRestarts)
	case lf.cooldown < 0:
		return usageErr("launch: --cooldown %v: want 0 or more", lf.cooldown)
	}
	if !hasFlag(train[1:], "checkpoint-dir") {
		return usageErr("launch: the training command needs --checkpoint-dir DIR: a restart resumes from it")
	}
	if v, ok := flagValue(train[1:], "emergency-checkpoint"); ok && v == "false" {
		fmt.Fprintln(os.Stderr, "dml launch: --emergency-checkpoint=false: a restart goes back to the last scheduled checkpoint")
	}
	return nil
}

// hasFlag says whether args set flag name (-name, --name, with =value or not).
func hasFlag(args []string, name string) bool {
	_, ok := flagValue(args, name)
	return ok
}

// flagValue is the value args give flag name ("true" for a bare flag).
func flagValue(args []string, name string) (string, bool) {
	val, found := "", false
	for i, a := range args {
		if a == "--" {
			break
		}
		k := strings.TrimLeft(a, "-")
		if k == a {
			continue
		}
		v, hasEq := "", false
		if p := strings.IndexByte(k, '='); p >= 0 {
			k, v, hasEq = k[:p], k[p+1:], true
		}
		if k != name {
			continue
		}
		found = true
		switch {
		case hasEq:
			val = v
		case i+1 < len(args) && !strings.HasPrefix(args[i+1], "-"):
			val = args[i+1]
		default:
			val = "true"
		}
	}
	return val, found
}

// pool builds the slots from --np or --hosts.
func (lf *launchFlags) pool() (*slotPool, error) {
	var hosts []hostSlots
	if lf.np > 0 {
		hosts = []hostSlots{{Name: "localhost", Slots: lf.np}}
	} else {
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
		if name == "" || strings.ContainsAny(name, " \t/:=") {
			return nil, fmt.Errorf("%q: not a host name", f)
		}
		if seen[name] {
			return nil, fmt.Errorf("host %s is given twice", name)
		}
		seen[name] = true
		out = append(out, hostSlots{name, slots})
	}
	return out, nil
}

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

// launchEvents says whether this rank runs under dml launch.
func launchEvents() bool { return os.Getenv("DML_LAUNCH_EVENTS") == "1" }

// launchEvent prints one event for dml launch (when it asked for them).
func launchEvent(ev map[string]any) {
	if !launchEvents() {
		return
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	os.Stderr.Write(append([]byte(launchEventPrefix), append(b, '\n')...))
}

// keepLastWord sets the liveness ring's last word to tr's emergency
// checkpoint while tr trains; the function it returns unsets it.
func keepLastWord(rank int, tr *trainer.Trainer, stderr io.Writer) func() {
	f := func(d watch.Death) {
		path, steps, err := tr.LastWord(trainer.Emergency{DeadRank: d.Rank, DeadHost: d.Host, FoundBy: d.By})
		switch {
		case err == nil:
			fmt.Fprintf(stderr, "dml: rank %d: emergency checkpoint of step %d, the last this rank completed: %s\n", rank, steps, path)
			launchEvent(map[string]any{"event": "emergency", "rank": rank, "steps": steps, "path": path})
		case errors.Is(err, trainer.ErrNoLastWord):
			if rank == 0 {
				fmt.Fprintf(stderr, "dml: rank %d: %v\n", rank, err)
			}
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
	// and any completed after the checkpoint resumed from).
	StepsLost int `json:"steps_lost,omitempty"`
	// RecoverySec is from the report of the death to the first step of
	// the next attempt.
	RecoverySec float64 `json:"recovery_sec,omitempty"`
	// EndSec is from the report of the death to the job's end, and
	// FirstStepSec from this attempt's start to its first step: the two
	// parts of a recovery that are not the new job's start-up.
	EndSec       float64 `json:"end_after_death_sec,omitempty"`
	FirstStepSec float64 `json:"first_step_sec,omitempty"`
	Seconds     float64 `json:"seconds"`
	LastError   string  `json:"last_error,omitempty"`

	start, death, firstStep time.Time
	deathLine               string
}

type deathEvent struct {
	Rank    int    `json:"rank"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Step    int    `json:"step"`
	Op      string `json:"op"`
	Silent  bool   `json:"silent"`
	FoundBy int    `json:"found_by"`
	// Slot is the pool's host the rank ran on.
	Slot string `json:"slot_host,omitempty"`
}

// supervisor runs the job until it ends well or cannot go on.
type supervisor struct {
	lf             launchFlags
	pool           *slotPool
	dml            string
	train          []string
	stdout, stderr io.Writer
	now            func() time.Time
	attempts       []*attempt

	mu      sync.Mutex
	current *attempt
}

func (sv *supervisor) printf(format string, a ...any) {
	fmt.Fprintf(sv.stderr, "dml launch: "+format+"\n", a...)
}

func (sv *supervisor) run() error {
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
		args := sv.command(world, np, len(sv.attempts) > 0)
		a := &attempt{Ranks: np, Emergency: -1, ResumedSteps: -1, start: sv.now()}
		if !sv.pool.local {
			a.Hosts = world
		}
		if len(sv.attempts) == 0 {
			sv.printf("starting %d rank(s): %s", np, strings.Join(args, " "))
		}
		sv.attempts = append(sv.attempts, a)
		interrupted, err := sv.runOnce(a, args, sigs)
		a.Seconds = sv.now().Sub(a.start).Seconds()
		if err == nil {
			sv.finish(nil)
			return nil
		}
		a.LastError = err.Error()
		if a.Death != nil {
			a.EndSec = sv.now().Sub(a.death).Seconds()
		}
		switch {
		case interrupted:
			sv.finish(err)
			return exitCode{a.Exit, err}
		case a.Death == nil && a.Exit == 2:
			// The job refused its input: a restart would too.
			sv.finish(err)
			return reported{usageErr("%v", err)}
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

// lastError is ": " and the last attempt's error, if any.
func (sv *supervisor) lastError() string {
	if n := len(sv.attempts); n > 0 && sv.attempts[n-1].LastError != "" {
		return ": the job's last error: " + sv.attempts[n-1].LastError
	}
	return ""
}

// command is the launcher's command line for world.
func (sv *supervisor) command(world []hostSlots, np int, resume bool) []string {
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
	if filepath.Base(launcher[0]) == "mpirun" {
		out = append(out, "-x", "DML_LAUNCH_EVENTS")
	}
	if !hasNP {
		out = append(out, "-np", strconv.Itoa(np))
	}
	if !hasHosts && !sv.pool.local {
		out = append(out, "--host", hostList)
	}
	out = append(out, sv.dml)
	out = append(out, sv.train...)
	if resume && !hasFlag(sv.train[1:], "resume") {
		out = append(out, "--resume")
	}
	return out
}

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
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "DML_LAUNCH_EVENTS=1")
	cmd.Stdout = sv.stdout
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("launch: starting %s: %w", args[0], err)
	}
	sv.mu.Lock()
	sv.current = a
	sv.mu.Unlock()
	var lastLine string
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if ev, ok := strings.CutPrefix(line, launchEventPrefix); ok {
				sv.event(a, ev)
				continue
			}
			fmt.Fprintln(sv.stderr, line)
			if strings.HasPrefix(line, "dml: ") {
				lastLine = strings.TrimPrefix(line, "dml: ")
			}
		}
		io.Copy(io.Discard, pr)
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var werr error
	for done := false; !done; {
		select {
		case s := <-sigs:
			if !interrupted {
				// SIGTERM whatever came: mpirun forwards it to the ranks,
				// which stop at a step boundary with a checkpoint (on
				// SIGINT it would kill them at once).
				sv.printf("%v: asking the job to stop at the next step boundary (again to end it now)", s)
				cmd.Process.Signal(syscall.SIGTERM)
			} else {
				cmd.Process.Kill()
			}
			interrupted = true
		case werr = <-waited:
			done = true
		}
	}
	pw.Close()
	<-read
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
		lastLine = a.deathLine
	case lastLine == "":
		lastLine = fmt.Sprintf("%s: %v", args[0], werr)
	}
	return interrupted, errors.New(lastLine)
}

// event takes one event line of attempt a.
func (sv *supervisor) event(a *attempt, line string) {
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
		a.deathLine = fmt.Sprintf("rank %d (pid %d, host %s) died in %s", d.Rank, d.PID, d.Host, d.Op)
	case "emergency":
		a.Emergency = max(a.Emergency, head.Steps)
	case "first-step":
		if a.ResumedSteps >= 0 {
			return
		}
		a.ResumedSteps, a.firstStep = head.Steps-1, now
		a.FirstStepSec = now.Sub(a.start).Seconds()
		if n := len(sv.attempts); n >= 2 {
			sv.restarted(sv.attempts[n-2], a)
		}
	}
}

// restarted prints the line of a restart: prev failed, a has stepped.
func (sv *supervisor) restarted(prev, a *attempt) {
	who := fmt.Sprintf("the job failed (%s)", prev.LastError)
	if d := prev.Death; d != nil {
		// The step in flight: the dead rank's last report may be a step
		// or more old (it reports four times a second); the survivors'
		// emergency checkpoints say which step they completed.
		inflight := d.Step
		if prev.Emergency >= 0 {
			inflight = max(inflight, prev.Emergency+1)
		}
		lost := max(0, inflight-a.ResumedSteps)
		prev.StepsLost = lost
		prev.RecoverySec = a.firstStep.Sub(prev.death).Seconds()
		where := d.Host
		if where == "" {
			where = d.Slot
		}
		who = fmt.Sprintf("rank %d on %s died in step %d (last heard of in step %d)", d.Rank, where, inflight, d.Step)
		from := "its last checkpoint"
		if prev.Emergency >= 0 && prev.Emergency == a.ResumedSteps {
			from = "the survivors' emergency checkpoint"
		}
		sv.printf("restart %d: %s; %d rank(s) go on from step %d (%s), %d step(s) lost, recovered in %.1f s",
			len(sv.attempts)-1, who, a.Ranks, a.ResumedSteps, from, lost, prev.RecoverySec)
		return
	}
	prev.RecoverySec = a.firstStep.Sub(prev.start.Add(time.Duration(prev.Seconds * float64(time.Second)))).Seconds()
	sv.printf("restart %d: %s; %d rank(s) go on from step %d, recovered in %.1f s", len(sv.attempts)-1, who, a.Ranks, a.ResumedSteps, prev.RecoverySec)
}

// finish prints the summary and writes --report.
func (sv *supervisor) finish(err error) {
	restarts := len(sv.attempts) - 1
	lost, rec := 0, []string{}
	for _, a := range sv.attempts[:max(0, len(sv.attempts)-1)] {
		lost += a.StepsLost
		if a.RecoverySec > 0 {
			rec = append(rec, fmt.Sprintf("%.1f s", a.RecoverySec))
		}
	}
	if restarts > 0 || err != nil {
		how := "done"
		if err != nil {
			how = "stopped"
		}
		recovery := ""
		if len(rec) > 0 {
			recovery = ", recovery " + strings.Join(rec, ", ")
		}
		sv.printf("%s after %d restart(s): %d step(s) of work lost in all%s", how, restarts, lost, recovery)
	}
	if sv.lf.report == "" {
		return
	}
	rep := struct {
		OK        bool       `json:"ok"`
		Error     string     `json:"error,omitempty"`
		Restarts  int        `json:"restarts"`
		StepsLost int        `json:"steps_lost"`
		Attempts  []*attempt `json:"attempts"`
	}{err == nil, "", restarts, lost, sv.attempts}
	if err != nil {
		rep.Error = err.Error()
	}
	b, _ := json.MarshalIndent(rep, "", " ")
	if werr := os.WriteFile(sv.lf.report, append(b, '\n'), 0o644); werr != nil {
		sv.printf("--report: %v", werr)
	}
}
