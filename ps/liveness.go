package ps

import "time"

// Liveness: keep-alives to held workers, and giving up on silent ones.

// Tick runs the server's time-driven duties at time now and returns the
// messages to send: a keep-alive to every held worker that has had none for
// Timeout/4, and, when workers have gone missing (see below), an error reply
// to every unfinished worker together with a *MissingError (wrapping
// ErrWorkerMissing) naming them. After such an error the server is done:
// the caller sends what Tick returned, ignoring send failures, and gives
// up. The replies are valid until the next call of Step or Tick.
//
// A worker is missing when it has been silent for more than Timeout while
// others are held waiting (only the workers at the minimum clock can be
// holding anyone back), or, when nobody is held, when every remaining worker
// has been silent that long.
func (s *Server) Tick(now time.Duration) ([]Outgoing, error) {
	s.begin()
	s.keepAlive(now)
	if merr := s.checkMissing(now); merr != nil {
		s.abandon(merr)
		return s.out, merr
	}
	return s.out, nil
}

// keepAlive tells held workers, every Timeout/4, that the server is alive.
func (s *Server) keepAlive(now time.Duration) {
	for w, r := range s.pending {
		if r != nil && now-s.lastBeat[w] >= s.cfg.Timeout/4 {
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
