package paramserver

import (
	"fmt"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/engine"
)

// StopVoteWait is how long the ps stop vote waits for a worker, under a
// transport timeout of timeout: a whole timeout longer than a worker's own
// wait for a silent server (ps.ServerWait). A worker the vote waits for
// may itself be held by a server that stopped; its own wait then ends
// first, with room for its polling, and names the server, the cause,
// rather than the vote naming the worker. (With the two equal, either
// could end first: TestStallPSStoppedServer failed so.)
func StopVoteWait(timeout time.Duration) time.Duration { return ps.ServerWait(timeout) + timeout }

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
			if err := s.Comm.SendBytes([]byte{1}, w, engine.TagStopNote); err != nil {
				return nil, 0, 0, fmt.Errorf("stop note to worker rank %d: %w", w, err)
			}
		}
	}
	return s.Comm.RecvBytesWithin(from, tag, d)
}

// residueFilters is how many of the job's ps filters keep a residue
// (sigmod), which a checkpoint must carry per worker.
func residueFilters(j *engine.Job) int {
	if j.Cfg.Sync != engine.SyncPS {
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
