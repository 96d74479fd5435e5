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
	for w := range s.nw {
		if s.finished[w] || s.pending[w] != nil {
			continue
		}
		silent := now - s.lastHeard[w]
		if silent <= s.cfg.Timeout {
			if len(held) == 0 {
				return nil // someone is still making progress
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
	return &MissingError{Server: s.rank, Timeout: s.cfg.Timeout, Missing: missing, Held: held}
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

// Warnings returns the stall warnings found since the last call (by Tick)
// and forgets them.
func (s *Server) Warnings() []string {
	w := s.warnings
	s.warnings = nil
	return w
}
