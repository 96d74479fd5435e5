package trainer

import (
	"errors"
	"fmt"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/engine"
)

// The tags of the ps stop vote's messages (after tagResidue).
const (
	tagStop     = tagResidue + 1 + iota // ps bsp: a worker's flag to the first worker, and the OR back
	tagStopNote                         // ps: "a signal came" from a server, or from a worker under ssp/asp/dssp
)

// voteStop: a signalled server sends every worker a note (stopNotifier),
// which counts as the worker's own signal. Under BSP the workers are in
// step, and the first worker gathers their flags and sends back the OR;
// under SSP, ASP and DSSP a worker stops at its own next boundary, and a
// signalled worker sends the other workers a note so that they stop too.
func (p *psWorker) voteStop(local bool) (bool, error) {
	j := p.j
	note, err := p.pollStopNotes()
	if err != nil {
		return false, err
	}
	v := &p.vote
	out := v.Begin(local, note)
	for _, w := range out.Notes {
		if err := j.Comm.SendBytes([]byte{1}, w+j.Cfg.PS.Servers, tagStopNote); err != nil {
			return false, err
		}
	}
	if out.Decided {
		return out.Stop, nil
	}
	to := j.Cfg.Timeout
	if to <= 0 {
		to = collectives.DefaultTimeout
	}
	to = StopVoteWait(to)
	flag := func(b bool) []byte {
		if b {
			return []byte{1}
		}
		return []byte{0}
	}
	if !v.Gathers() {
		if err := j.Comm.SendBytes(flag(out.Flag), j.Reporter, tagStop); err != nil {
			return false, err
		}
		b, _, _, err := j.Comm.RecvBytesWithin(j.Reporter, tagStop, to)
		if err != nil {
			return false, fmt.Errorf("from the first worker (rank %d): %w", j.Reporter, err)
		}
		return len(b) == 1 && b[0] == 1, nil
	}
	flags := make([]bool, 0, v.Workers)
	for _, w := range v.Others() {
		b, _, _, err := j.Comm.RecvBytesWithin(w+j.Cfg.PS.Servers, tagStop, to)
		if err != nil {
			return false, fmt.Errorf("from worker rank %d: %w", w+j.Cfg.PS.Servers, err)
		}
		flags = append(flags, len(b) == 1 && b[0] == 1)
	}
	stop := v.Combine(out.Flag, flags)
	for _, w := range v.Others() {
		if err := j.Comm.SendBytes(flag(stop), w+j.Cfg.PS.Servers, tagStop); err != nil {
			return false, err
		}
	}
	return stop, nil
}

// StopVoteWait is how long the ps stop vote waits for a worker, under a
// transport timeout of timeout: a whole timeout longer than a worker's own
// wait for a silent server (ps.ServerWait). A worker the vote waits for
// may itself be held by a server that stopped; its own wait then ends
// first, with room for its polling, and names the server, the cause,
// rather than the vote naming the worker. (With the two equal, either
// could end first: TestStallPSStoppedServer failed so.)
func StopVoteWait(timeout time.Duration) time.Duration { return ps.ServerWait(timeout) + timeout }

// pollStopNotes takes every stop note that has arrived, without waiting.
func (p *psWorker) pollStopNotes() (bool, error) {
	got := false
	for {
		_, _, _, err := p.j.Comm.RecvBytesWithin(collectives.AnySource, tagStopNote, 0)
		if errors.Is(err, collectives.ErrTimeout) {
			return got, nil
		}
		if err != nil {
			return got, fmt.Errorf("stop notes: %w", err)
		}
		got = true
	}
}

// stopNotifier is a server rank's transport: before each receive of the
// server loop it asks Stop, and the first time a signal has come it sends
// every worker a stop note (the server itself goes on serving until every
// worker is done). The loop receives at least every Timeout/4.
type stopNotifier struct {
	collectives.Comm
	stop    func() bool
	workers []int
	sent    bool
}

func (s *stopNotifier) RecvBytesWithin(from, tag int, d time.Duration) ([]byte, int, int, error) {
	if !s.sent && s.stop() {
		s.sent = true
		for _, w := range s.workers {
			if err := s.Comm.SendBytes([]byte{1}, w, tagStopNote); err != nil {
				return nil, 0, 0, fmt.Errorf("stop note to worker rank %d: %w", w, err)
			}
		}
	}
	return s.Comm.RecvBytesWithin(from, tag, d)
}

// residueFilters is how many of the job's ps filters keep a residue
// (sigmod), which a checkpoint must carry per worker.
func residueFilters(j *engine.Job) int {
	if j.Cfg.Sync != SyncPS {
		return 0
	}
	specs, err := ps.ParseFilters(j.Cfg.PS.Filters)
	if err != nil {
		return 0
	}
	n := 0
	for _, f := range specs {
		if hasResidue(f) {
			n++
		}
	}
	return n
}

// hasResidue reports whether filters of spec keep a residue (sigmod).
func hasResidue(spec ps.FilterSpec) bool { return ps.Residue(spec.NewFilter(1)) != nil }
