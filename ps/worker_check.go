package ps

import (
	"fmt"
)

// Worker-side validation: nothing invalid is sent to a server.

// checkKeys validates a key list against the model and its values' length.
func (w *Worker) checkKeys(op string, keys []int64, n int) error {
	if len(keys) != n {
		return fmt.Errorf("ps worker rank %d: %s: %d keys, %d values: %w", w.rank, op, len(keys), n, ErrArgument)
	}
	prev := int64(-1)
	for i, k := range keys {
		if k <= prev || k >= int64(w.p) {
			return fmt.Errorf("ps worker rank %d: %s: key %d = %d: keys must be strictly increasing in [0,%d): %w",
				w.rank, op, i, k, w.p, ErrArgument)
		}
		prev = k
	}
	return nil
}

func (w *Worker) checkFinite(op string, u Update) error {
	if i := firstNonFinite(u.Values); i >= 0 {
		k := int64(i)
		if !u.Dense {
			k = u.Keys[i]
		}
		return fmt.Errorf("ps worker rank %d: %s: non-finite gradient %g at key %d: %w", w.rank, op, u.Values[i], k, ErrArgument)
	}
	return nil
}

// checkFiltered validates what the filters produced.
func (w *Worker) checkFiltered(op string, u Update) error {
	if u.Encoding.width() == 0 {
		return fmt.Errorf("ps worker rank %d: %s: filters chose unknown encoding %v: %w", w.rank, op, u.Encoding, ErrArgument)
	}
	if u.Dense {
		if len(u.Values) != w.p {
			return fmt.Errorf("ps worker rank %d: %s: filters left %d dense values, model has %d: %w",
				w.rank, op, len(u.Values), w.p, ErrArgument)
		}
	} else if err := w.checkKeys(op+" (after filters)", u.Keys, len(u.Values)); err != nil {
		return err
	}
	return w.checkFinite(op+" (after filters)", u)
}

// pushRangeLen and pushKeysLen are the sizes of push messages.
func pushRangeLen(n int, enc Encoding) int { return 20 + n*enc.width() }

func pushKeysLen(keys []int64, enc Encoding) int {
	return 12 + len(keys)*enc.width() + keysLen(keys)
}

// keysLen is the size of keys' block (appendKeys): its form byte and
// the gaps or the runs, whichever appendKeys writes.
func keysLen(keys []int64) int {
	gaps, follow := gapsLen(keys)
	if asRuns(keys, follow, gaps) {
		return 1 + runsLen(keys)
	}
	return 1 + gaps
}
