package elastic

import (
	"bufio"
	"encoding/json"
	"errors"
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

	"github.com/dml-project/dml/internal/regfile"
)

// attempt is one run of the job, as dml launch saw it.
type attempt struct {
	Ranks int    `json:"ranks"`
	Hosts []Host `json:"hosts,omitempty"`
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

// Config is what the supervisor runs and how far it goes on (dml launch's
// flags, checked by the command).
type Config struct {
	// Hosts are the slots to run on; Local: they are this machine's (--np),
	// where a failed rank's slot is left out for good, not its host for
	// Cooldown.
	Hosts    []Host
	Local    bool
	Cooldown time.Duration
	// Discovery is the command that prints the hosts (--host-discovery; ""
	// none), run every DiscoverEvery while the job could grow.
	Discovery     string
	DiscoverEvery time.Duration
	// MinNP, MaxNP (0: every slot) and MaxRestarts bound the job's size
	// and its restarts.
	MinNP, MaxNP, MaxRestarts int
	// Launcher is the command that starts the job ("": mpirun
	// --oversubscribe); {np} and {hosts} in it are replaced.
	Launcher string
	// Report is the JSON report's file ("": none).
	Report string
	// Program is the dml binary the launcher starts on every rank, with
	// Job's arguments.
	Program string
	Job     Job
	// Stdout and Stderr take the job's output and the supervisor's lines.
	Stdout, Stderr io.Writer
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Job is the training command the supervisor starts, and starts again.
type Job interface {
	// Args is the command's arguments for the attempt-th run (from 0:
	// later runs resume from the newest checkpoint). timeline, where not
	// "", is the attempt's own --timeline file.
	Args(attempt int, timeline string) []string
	// Timeline is the command's --timeline ("": none): the supervisor
	// joins the attempts' timelines into it at the end.
	Timeline() string
}

// Interrupted is Run's error when dml launch was asked to stop by a
// signal: the command exits with the signal's status.
type Interrupted struct {
	Signal os.Signal
	Err    error
}

func (e *Interrupted) Error() string { return e.Err.Error() }
func (e *Interrupted) Unwrap() error { return e.Err }

// Refused is Run's error when the job refused its input (exit 2): a
// restart would too. Its ranks said why.
type Refused struct{ Err error }

func (e *Refused) Error() string { return e.Err.Error() }
func (e *Refused) Unwrap() error { return e.Err }

// Supervisor runs the job until it ends well or cannot go on.
type Supervisor struct {
	cfg      Config
	pool     *pool
	now      func() time.Time
	attempts []*attempt

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

// New is a supervisor of cfg's job; Run runs it.
func New(cfg Config) *Supervisor {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	p := &pool{hosts: cfg.Hosts, local: cfg.Local, cooldown: cfg.Cooldown, out: map[string]time.Time{}, lost: map[string]int{}}
	return &Supervisor{cfg: cfg, pool: p, now: now}
}

func (sv *Supervisor) printf(format string, a ...any) {
	fmt.Fprintf(sv.cfg.Stderr, "dml launch: "+format+"\n", a...)
}

// Run runs the job, restarting it on what is left after a rank dies and
// growing it where hosts come, until it ends well (nil) or cannot go on:
// an *Interrupted, a *Refused, or the job's last error.
func (sv *Supervisor) Run() error {
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
		world, np := sv.pool.world(sv.now(), sv.cfg.MaxNP)
		if np < sv.cfg.MinNP {
			err := fmt.Errorf("launch: %d rank(s) left, below --min-np %d: giving up%s", np, sv.cfg.MinNP, sv.lastError())
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
			return &Interrupted{sv.signalled, err}
		case a.Grew != "" && a.Death == nil:
			continue // stopped to take hosts in: not a failure
		case a.Death == nil && a.Exit == 2:
			// The job refused its input: a restart would too.
			sv.finish(err)
			return &Refused{err}
		case a.Death == nil && a.Grew == "" && a.Exit >= 0 && a.Exit < 128:
			// Not a death (the ring named none, no rank was killed by a
			// signal): a failure of the training itself (a non-finite
			// loss, a file gone), which a restart would meet again.
			err := fmt.Errorf("launch: the job failed without losing a rank: not restarted: %s", a.LastError)
			sv.finish(err)
			return err
		case restarts >= sv.cfg.MaxRestarts:
			err := fmt.Errorf("launch: the job failed again after %d restart(s) (--max-restarts %d): giving up: %s", restarts, sv.cfg.MaxRestarts, a.LastError)
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
	hosts []Host
	err   error
}

// discover runs the discovery command apart from the supervisor's loop
// (which goes on handling signals and deaths meanwhile: a command that
// hangs held them up to its 10 s bound, issue 29) and sends what it found.
func (sv *Supervisor) discover(found chan<- discovered) {
	go func() {
		hosts, err := DiscoverHosts(sv.cfg.Discovery)
		found <- discovered{hosts, err}
	}()
}

// rediscovered takes in what a run of discovery found (a failure is said
// once, and the hosts known are kept).
func (sv *Supervisor) rediscovered(d discovered) {
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
func (sv *Supervisor) mayGrow(a *attempt, interrupted bool) bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return !interrupted && a.Grew == "" && a.Death == nil && a.ResumedSteps >= 0
}

// grow asks a's job to stop at the next step boundary, to be started again
// larger, when it may grow and there is growth to take in.
func (sv *Supervisor) grow(a *attempt, cmd *exec.Cmd, interrupted bool) {
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
func (sv *Supervisor) growth(a *attempt) string {
	world, np := sv.pool.world(sv.now(), sv.cfg.MaxNP)
	if np <= a.Ranks {
		return ""
	}
	var names []string
	for _, h := range world {
		if !slices.ContainsFunc(a.Hosts, func(o Host) bool { return o.Name == h.Name }) {
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
func (sv *Supervisor) lastError() string {
	if n := len(sv.attempts); n > 0 && sv.attempts[n-1].LastError != "" {
		return ": the job's last error: " + sv.attempts[n-1].LastError
	}
	return ""
}

// command is the launcher's command line for world, the attempt-th
// (from 0: the later ones resume).
func (sv *Supervisor) command(world []Host, np int, attempt int) []string {
	var hs []string
	for _, h := range world {
		hs = append(hs, fmt.Sprintf("%s:%d", h.Name, h.Slots))
	}
	hostList := strings.Join(hs, ",")
	launcher := strings.Fields(sv.cfg.Launcher)
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
	out = append(out, sv.cfg.Program)
	tl := sv.timeline()
	if tl != "" { // each attempt's own; finish concatenates them
		tl = attemptTimeline(tl, attempt)
	}
	return append(out, sv.cfg.Job.Args(attempt, tl)...)
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

// runOnce runs one attempt, passing the job's output through and reading
// its events; interrupted says dml launch itself was asked to stop.
func (sv *Supervisor) runOnce(a *attempt, args []string, sigs chan os.Signal) (interrupted bool, err error) {
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
func (sv *Supervisor) startJob(args []string) (*exec.Cmd, *os.File, error) {
	cmd := exec.Command(args[0], args[1:]...)
	events := "1"
	if sv.events != "" {
		events = "tcp:" + sv.events
	}
	cmd.Env = append(os.Environ(), "DML_LAUNCH_EVENTS="+events, fmt.Sprintf("DML_LAUNCH_ATTEMPT=%d", len(sv.attempts)-1))
	cmd.Stdout = sv.cfg.Stdout
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
func (sv *Supervisor) relay(pr *os.File, a *attempt, lastLine *string) <-chan struct{} {
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if ev, ok := strings.CutPrefix(line, EventPrefix); ok {
				sv.routeEvent(ev, a)
				continue
			}
			if strings.HasPrefix(line, "mpirun: Forwarding signal") {
				continue // dml launch's own stop request
			}
			fmt.Fprintln(sv.cfg.Stderr, line)
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
func (sv *Supervisor) watch(a *attempt, cmd *exec.Cmd, sigs chan os.Signal, waited <-chan error) (interrupted bool, werr error) {
	sv.mu.Lock()
	allSaid := make(chan struct{})
	a.allSaid = allSaid
	sv.mu.Unlock()
	var ending <-chan time.Time
	nsig := 0
	var poll <-chan time.Time
	if !sv.pool.local {
		t := time.NewTicker(sv.cfg.DiscoverEvery)
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
			case sv.cfg.Discovery == "":
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
func (sv *Supervisor) listenEvents() {
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
					if ev, ok := strings.CutPrefix(sc.Text(), EventPrefix); ok {
						sv.routeEvent(ev, nil)
					}
				}
			}()
		}
	}()
	sv.closeEvents = func() { ln.Close() }
}

// routeEvent hands an event line to the attempt it names (else to a).
func (sv *Supervisor) routeEvent(line string, a *attempt) {
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
func (sv *Supervisor) event(a *attempt, line string) {
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
func (sv *Supervisor) restarted(prev, a *attempt) {
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
func (sv *Supervisor) finish(err error) {
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
	if sv.cfg.Report == "" {
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
	if werr := regfile.WriteFile(sv.cfg.Report, append(b, '\n')); werr != nil {
		sv.printf("--report: %v", werr)
	}
}

// timeline is the training command's --timeline ("": none).
func (sv *Supervisor) timeline() string {
	return sv.cfg.Job.Timeline()
}
