package ps

import "time"

// Liveness: keep-alives to held workers, and giving up on silent ones.

// keepAlive tells held workers, every Timeout/4, that the server is alive.
func (s *server) keepAlive(now time.Duration) error {
	for w, r := range s.pending {
		if r != nil && now-s.lastBeat[w] >= s.cfg.Timeout/4 {
			s.lastBeat[w] = now
			if err := s.send(w, appendWait(s.out[:0])); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkMissing reports the workers that have been silent for longer than
// Timeout while others are held waiting (only the workers at the minimum
// clock can be holding anyone back), or, when nobody is held, all remaining
// workers if every one of them has been silent that long.
func (s *server) checkMissing(now time.Duration) *MissingError {
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
// one. Send failures are ignored: the server is failing already.
func (s *server) abandon(e *MissingError) {
	b := appendError(nil, codeMissing, e.Error())
	for w := range s.nw {
		if !s.finished[w] {
			_ = s.c.SendBytes(b, s.workerRank(w), ReplyTag)
		}
	}
}
