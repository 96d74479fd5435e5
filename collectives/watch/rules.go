package watch

import (
	"encoding/binary"
	"strconv"
	"time"

	"github.com/dml-project/dml/collectives/stall"
)

// rules is the liveness ring's logic on one rank, free of I/O and of the
// clock: Ring feeds it what happens (a record from the predecessor, a
// read that timed out, the connection closing, this rank's own bye) with
// the time, and carries out the effects it returns. The tests drive it on
// a fake clock and a simulated ring (rules_test.go). Not safe for
// concurrent use: Ring holds its mutex around every call.
type rules struct {
	rank, size int
	tick       time.Duration // how often the watcher wakes to look at the time
	pred       Death         // the predecessor, as its death would be reported
	last       time.Time     // when its last record arrived
	loop       time.Time     // the watcher's last wake-up
	muted      bool          // the job is being aborted: report no death
	gone       *Death        // the death this rank found or was told of
}

// record is one record for the successor.
type record struct {
	kind    byte
	payload []byte
}

// effects is what Ring does after an event: send the records to the
// successor in order, report a death this rank found (OnDeath) or was
// told of (OnNotice), note the predecessor's status, and stop watching
// the predecessor when done.
type effects struct {
	send          []record
	death, notice *Death
	heard         *Heard
	done          bool
}

func newRules(rank, size int, tick time.Duration) *rules {
	return &rules{rank: rank, size: size, tick: tick}
}

func (w *rules) next() int { return (w.rank + 1) % w.size }

// watching starts watching the predecessor h at now (its hello was right).
func (w *rules) watching(h hello, now time.Time) {
	w.pred = Death{Rank: h.rank, PID: h.pid, Host: h.host, Op: stall.Op{Step: -1}, By: w.rank}
	w.last, w.loop = now, now
}

// wake accounts for the time since the watcher last woke: a gap much
// longer than its tick means this process did not run (SIGSTOP, a
// suspended VM), and that time is not the predecessor's silence.
func (w *rules) wake(now time.Time) {
	if gap := now.Sub(w.loop); gap > 3*w.tick+time.Second {
		w.last = w.last.Add(gap - w.tick)
	}
	w.loop = now
}

// received handles a record from the predecessor.
func (w *rules) received(now time.Time, kind byte, p []byte) effects {
	w.wake(now)
	w.last = now
	switch kind {
	case kindStatus:
		if len(p) >= 16 {
			w.pred.Op = stall.Op{Seq: binary.BigEndian.Uint64(p), Step: int(int64(binary.BigEndian.Uint64(p[8:]))), Name: string(p[16:])}
			return effects{heard: &Heard{Rank: w.pred.Rank, Op: w.pred.Op, At: now}}
		}
	case kindBye:
		e := effects{done: true}
		if reason := string(p); reason == ByeAbort || reason == ByeExit {
			e.send = w.ending(w.pred.Rank)
		}
		return e
	case kindEnding:
		if origin, err := strconv.Atoi(string(p)); err == nil {
			return effects{send: w.ending(origin)}
		}
	case kindDead:
		if d, err := decodeDeath(p); err == nil {
			return w.told(d)
		}
	}
	return effects{}
}

// quietFor handles a read that timed out: the predecessor counts as dead
// once it has sent nothing for quiet (≤ 0: never).
func (w *rules) quietFor(now time.Time, quiet time.Duration) effects {
	w.wake(now)
	if quiet > 0 && now.Sub(w.last) > quiet {
		d := w.pred
		d.Silent, d.Ago = true, now.Sub(w.last)
		e := w.found(d)
		e.done = true
		return e
	}
	return effects{}
}

// closed handles the predecessor's connection closing (or failing)
// without a bye: it died.
func (w *rules) closed(now time.Time) effects {
	w.wake(now)
	d := w.pred
	d.Ago = now.Sub(w.last)
	e := w.found(d)
	e.done = true
	return e
}

// bye is this rank's own bye: after an abort or an exit, the deaths that
// follow are its doing and are not reported.
func (w *rules) bye(reason string) record {
	if reason == ByeAbort || reason == ByeExit {
		w.muted = true
	}
	return record{kindBye, []byte(reason)}
}

// ending handles a rank's abort of the job (its bye said so, or a notice
// from upstream): the launcher is about to kill every rank, so a rank that
// ends now has not died on its own: nothing more is reported. The notice
// goes on around the ring, up to the aborting rank.
func (w *rules) ending(origin int) []record {
	if w.muted {
		return nil
	}
	w.muted = true
	if w.next() != origin {
		return []record{{kindEnding, []byte(strconv.Itoa(origin))}}
	}
	return nil
}

// found handles the predecessor's death: unless a death is already known
// (then this one followed from it) or the job is being aborted, record
// it, pass the notice on and report it.
func (w *rules) found(d Death) effects {
	if w.muted || w.gone != nil {
		return effects{}
	}
	w.gone = &d
	e := effects{death: &d}
	if w.next() != d.Rank {
		e.send = []record{{kindDead, encodeDeath(d)}}
	}
	return e
}

// told handles a notice from upstream: record it, pass it on (until it
// would reach the dead rank or the one that found it), and report it.
func (w *rules) told(d Death) effects {
	if w.gone != nil {
		return effects{}
	}
	w.gone = &d
	e := effects{notice: &d}
	if next := w.next(); next != d.Rank && next != d.By {
		e.send = []record{{kindDead, encodeDeath(d)}}
	}
	return e
}
