package ps

import (
	"fmt"
	"strings"
	"time"
)

// Liveness: keep-alives to held workers, and giving up on silent ones.

// Tick runs the server's time-driven duties at time now and returns the
// messages to send: a keep-alive to every held worker that has had none for
// a beat (Timeout/4, or StallWarn/2 if shorter), and, when workers have gone missing (see below), an error reply
// to every unfinished worker together with a *MissingError (wrapping
// ErrWorkerMissing) naming them. After such an error the server is done:
// the caller sends what Tick returned, ignoring send failures, and gives
// up. The replies are valid until the next call of Step or Tick. Stall
// warnings (see stallCheck) wait in Warnings.
//
// A worker is missing when it has been silent for more than Timeout while
// others are held waiting (only the workers at the minimum clock can be
// holding anyone back), or, when nobody is held, when every remaining worker
// has been silent that long.
func (s *Server) Tick(now time.Duration) ([]Outgoing, error) {
	s.begin()
	s.keepAlive(now)
	s.stallCheck(now)
	if merr := s.checkMissing(now); merr != nil {
		s.abandon(merr)
		return s.out, merr
	}
	return s.out, nil
}

// keepAlive tells held workers, every beat, that the server is alive.
func (s *Server) keepAlive(now time.Duration) {
	for w, r := range s.pending {
		if r != nil && now-s.lastBeat[w] >= s.cfg.beat() {
			s.lastBeat[w] = now
			s.emit(s.workerRank(w), appendWait(s.next()))
		}
	}
}

// checkMissing returns the workers that count as missing at now, or nil.
func (s *Server) checkMissing(now time.Duration) *MissingError {
	var held []int
	for w, r := range s.pending {
		if r != nil {
			held = append(held, s.workerRank(w))
		}
	}
	m := s.ctl.MinClock()
	var missing []MissingWorker
	recent, active := 0, 0 // workers heard within Timeout, within a beat
	for w := range s.nw {
		if s.finished[w] || s.pending[w] != nil {
			continue
		}
		silent := now - s.lastHeard[w]
		if silent <= s.cfg.Timeout {
			recent++
			if silent <= s.cfg.beat() {
				active++
			}
			continue
		}
		if len(held) > 0 && s.ctl.Clock(w) != m {
			continue
		}
		missing = append(missing, MissingWorker{Rank: s.workerRank(w), Clock: s.ctl.Clock(w), Silent: silent, Hello: s.said[w]})
	}
	if len(missing) == 0 {
		return nil
	}
	// Nobody held: the silent workers count as missing once every other
	// is silent too, or, under ASP, where nobody ever waits on a worker,
	// while others are making progress (heard within a beat): otherwise
	// the job would name them only once the others are done. (Under BSP,
	// SSP and DSSP a silent worker soon holds the others.)
	asp := len(held) == 0 && recent > 0 && s.cfg.Consistency == ASP && active > 0
	if len(held) == 0 && recent > 0 && !asp {
		return nil // someone is still making progress
	}
	e := &MissingError{Server: s.rank, Timeout: s.cfg.Timeout, Missing: missing, Held: held}
	if asp {
		for w := range s.nw {
			if !s.finished[w] && now-s.lastHeard[w] <= s.cfg.beat() {
				e.Active = append(e.Active, s.workerRank(w))
			}
		}
	}
	return e
}

// abandon tells every unfinished worker why the server is giving up; held
// workers get it as the answer to their request, the others with their next
// one. All share one message.
func (s *Server) abandon(e *MissingError) {
	b := appendError(nil, codeMissing, e.Error())
	for w := range s.nw {
		if !s.finished[w] {
			s.queue(s.workerRank(w), b)
		}
	}
}

// The stall inspector on the server side. The server is the one place that
// knows who is missing from a round: the workers it holds have pushed for
// clock m+1 (or further, under SSP), and the unfinished workers still at
// the minimum clock m, with no request held, are the ones that have not
// pushed for the clock yet. stallCheck names them, with the clock and how
// long the held workers have waited, once every StallWarn while the stall
// lasts (Horovod's stall inspector, for a parameter server); Timeout then
// gives up on them (checkMissing).

// stallCheck appends a warning to s.warnings when workers have been held
// for a multiple of StallWarn (the oldest held request's age), naming
// those that have not pushed for the minimum clock.
func (s *Server) stallCheck(now time.Duration) {
	if s.cfg.StallWarn <= 0 {
		return
	}
	oldest := time.Duration(-1)
	var held []int
	for w, r := range s.pending {
		if r != nil {
			held = append(held, s.workerRank(w))
			if oldest < 0 || r.arrived < oldest {
				oldest = r.arrived
			}
		}
	}
	m := s.ctl.MinClock()
	if len(held) == 0 || m != s.stallClock {
		s.stallClock, s.stallWarned = m, 0
		if len(held) == 0 {
			if s.cfg.Consistency == ASP {
				s.quietCheck(now)
			}
			return
		}
	}
	waited := now - oldest
	if waited < time.Duration(s.stallWarned+1)*s.cfg.StallWarn {
		return
	}
	s.stallWarned = int(waited / s.cfg.StallWarn)
	var b strings.Builder
	fmt.Fprintf(&b, "stall: ps server rank %d (%v): worker ranks %v held for %v at clock %d, waiting for",
		s.rank, s.cfg.Consistency, held, waited.Round(time.Millisecond), m)
	n := 0
	for w := range s.nw {
		if s.finished[w] || s.pending[w] != nil || s.ctl.Clock(w) != m {
			continue
		}
		if n > 0 {
			b.WriteString(",")
		}
		n++
		fmt.Fprintf(&b, " rank %d (has not pushed for clock %d; last heard %v ago", s.workerRank(w), m, (now - s.lastHeard[w]).Round(time.Millisecond))
		if !s.said[w] {
			b.WriteString(", never connected")
		}
		b.WriteString(")")
	}
	if n == 0 {
		b.WriteString(" no worker at the minimum clock (a held request the controller does not release)")
	}
	s.warnings = append(s.warnings, b.String())
}

// quietCheck warns, under ASP, once every StallWarn, about each
// unfinished worker silent (no request) for StallWarn while others are
// making progress (heard within a beat): nobody waits on it, so no
// round-based stall report names it.
func (s *Server) quietCheck(now time.Duration) {
	active := 0
	for w := range s.nw {
		if !s.finished[w] && now-s.lastHeard[w] <= s.cfg.beat() {
			active++
		}
	}
	if active == 0 {
		return // nobody is going on without them (checkMissing gives up in time)
	}
	for w := range s.nw {
		silent := now - s.lastHeard[w]
		if s.finished[w] || silent < s.cfg.StallWarn {
			if s.quietWarned != nil {
				s.quietWarned[w] = 0
			}
			continue
		}
		if s.quietWarned == nil {
			s.quietWarned = make([]int, s.nw)
		}
		k := int(silent / s.cfg.StallWarn)
		if k <= s.quietWarned[w] {
			continue
		}
		s.quietWarned[w] = k
		var ranks []int
		for v := range s.nw {
			if !s.finished[v] && now-s.lastHeard[v] <= s.cfg.beat() {
				ranks = append(ranks, s.workerRank(v))
			}
		}
		never := ""
		if !s.said[w] {
			never = ", never connected"
		}
		s.warnings = append(s.warnings, fmt.Sprintf("stall: ps server rank %d (%v): worker rank %d silent for %v (at clock %d%s) while worker ranks %v are active",
			s.rank, s.cfg.Consistency, s.workerRank(w), silent.Round(time.Millisecond), s.ctl.Clock(w), never, ranks))
	}
}

// Warnings returns the stall warnings found since the last call (by Tick)
// and forgets them.
func (s *Server) Warnings() []string {
	w := s.warnings
	s.warnings = nil
	return w
}
