package decentral

import (
	"fmt"
	"time"

	"github.com/dml-project/dml/trainer/engine"
)

// --max-steps under adpsgd. The ranks share no step boundary, so rank 0
// cannot stop them all at the same step: it learns of their steps from
// reports that arrive while they go on. Instead each rank runs its share
// of the steps left (stepQuota) and then waits, between two steps, for
// the final point; rank 0 calls it once the reports add up to the cap.
// The total is then exactly --max-steps (0: none at all, the initial
// weights saved), where a cap checked only by rank 0 overshot by the
// steps run while the reports and the call travelled. A rank at its quota
// tells its passive partners (a pause), so that a passive rank waiting to
// be averaged (maxLag) goes on without them.

// stepQuota is rank r's share (of n ranks) of maxSteps less the done steps
// a resumed run counts already: the first ranks take one more where they
// do not divide evenly. < 0: no cap.
func stepQuota(maxSteps, done, r, n int) int {
	if maxSteps < 0 {
		return -1
	}
	left := max(0, maxSteps-done)
	q := left / n
	if r < left%n {
		q++
	}
	return q
}

// atQuota says this rank has run its share of --max-steps.
func (s *adpsgdStrategy) atQuota() bool { return s.quota >= 0 && s.step >= s.quota }

// Spent is atQuota, for the loop (engine.Pacer).
func (s *adpsgdStrategy) Spent() bool { return s.atQuota() }

// pauseAtQuota tells an active rank's partners, once an epoch, that it has
// run its share and will not average again before the point.
func (s *adpsgdStrategy) pauseAtQuota() error {
	if !s.atQuota() || s.quotaPaused {
		return nil
	}
	s.quotaPaused = true
	return s.pausePartners(0, true)
}

// timeout is how long a rank at its quota waits for the others (and rank
// 0 for a report): Config.Timeout.
func (s *adpsgdStrategy) timeout() time.Duration {
	if t := s.Job.Cfg.Timeout; t > 0 {
		return t
	}
	return engine.DefaultConfig().Timeout
}

func (s *adpsgdStrategy) quotaTimeout(what string) error {
	return fmt.Errorf("adpsgd: rank %d has run its %d of --max-steps, and %s for %v (Config.Timeout): a rank stopped, or its share takes longer than that (raise Config.Timeout)",
		s.Job.Comm.Rank(), s.quota, what, s.timeout())
}
