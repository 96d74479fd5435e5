package trainer

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/model"
)

// The servers' last word under --sync ps (issue 20). The servers hold the
// training state (the weights and optimizer state of their key ranges);
// with replication on (--replicate-every; package ps, replica.go) server i
// also keeps server i+1's range. When a rank is found dead, a surviving
// server that holds every range (with two servers, either one: its own
// and its replica of the other's) writes them, at the newest BSP round it
// holds both at, as an emergency checkpoint; the workers hold no state of
// their own that the checkpoint needs, and write nothing.
//
// Departures, said in the metadata's emergency record and in the error
// when nothing is written: with three servers or more no survivor holds
// every range (each holds two), so none is written (the regular
// checkpoints are the fallback); a model with batch-norm statistics
// (which are the workers') and the sigmod filter's residues (also the
// workers') are not written either. Under ssp, asp and dssp the ranges
// are at whatever updates each server had (there is no common round to
// pair them at: the copy is as stale as the replication interval), and
// the checkpoint's step is the slowest worker's.

// serverWord keeps what a server's LastWord needs.
type serverWord struct {
	j     *job
	arch  model.Arch
	p     int // model length
	k     *ps.Keeper
	start Position
}

// keepServerWord makes this server rank keep its last word, when the job
// writes emergency checkpoints; it returns the keeper RunServerKeeping
// fills (nil: none).
func (j *job) keepServerWord(arch model.Arch, p int, start Position) *ps.Keeper {
	if !j.keepsLastWord() {
		return nil
	}
	w := &serverWord{j: j, arch: arch, p: p, k: &ps.Keeper{}, start: start}
	j.Trainer.serverWord.Store(w)
	return w.k
}

// keepsLastWord: the job writes emergency checkpoints.
func (j *job) keepsLastWord() bool {
	return j.Checkpoint.enabled() && j.Checkpoint.Emergency && j.Comm.Size() > 1
}

// write is LastWord for a server.
func (w *serverWord) write(e Emergency) (string, int, error) {
	j := w.j
	switch {
	case j.residueFilters() > 0:
		return "", 0, fmt.Errorf("%w: the sigmod filter's residues are the workers'", ErrNoLastWord)
	case w.arch.NumState() > 0:
		return "", 0, fmt.Errorf("%w: the batch-norm statistics are the workers'", ErrNoLastWord)
	}
	h, err := w.k.Held()
	if err != nil {
		return "", 0, fmt.Errorf("%w: %v", ErrNoLastWord, err)
	}
	c := &checkpoint{Params: make([]float32, w.p)}
	if j.cfg.Opt.Kind.HasState() {
		c.OptState = make([]float32, w.p)
	}
	covered := 0
	for _, r := range h.Ranges {
		copy(c.Params[r.Range.Lo:r.Range.Hi], r.Weights)
		if c.OptState != nil {
			copy(c.OptState[r.Range.Lo:r.Range.Hi], r.OptState)
		}
		covered += r.Range.Len()
	}
	if covered != w.p {
		return "", 0, fmt.Errorf("%w: this server holds %d of the model's %d keys (with %d servers each holds its range and the next one's)",
			ErrNoLastWord, covered, w.p, j.cfg.PS.Servers)
	}
	pos := j.positionAfter(w.start, h.Clock)
	path := filepath.Join(j.Checkpoint.Dir, checkpointName(pos.Steps))
	if _, err := os.Stat(path); err == nil {
		return path, pos.Steps, nil
	}
	e.WrittenBy = j.Comm.Rank()
	e.Time = time.Now().UTC().Format(time.RFC3339Nano)
	c.Meta = j.checkpointMeta(w.arch, pos)
	c.Meta.Emergency = &e
	b, err := c.encode()
	if err != nil {
		return "", 0, fmt.Errorf("emergency checkpoint: %w", err)
	}
	if err := writeFileAtomic(path, b); err != nil {
		return "", 0, fmt.Errorf("emergency checkpoint: writing %s: %w", path, err)
	}
	return path, pos.Steps, nil
}

// positionAfter is the Position the training ranks reach from start after
// steps steps in all (steps >= start.Steps), as the step loop advances it:
// through the rest of a re-dealt epoch, then whole epochs.
func (j *job) positionAfter(start Position, steps int) Position {
	pos := start
	for pos.Steps < steps {
		per := j.sched.stepsPerEpoch()
		if len(pos.Reshard) > 0 {
			parts := epochParts(j.sched.n, j.cfg.Seed, pos.Epoch, j.cfg.Shuffle, pos.Reshard, j.sched.ranks)
			per = partSteps(parts, j.cfg.Batch)
		}
		left := per - pos.Step
		if n := steps - pos.Steps; n < left {
			pos.Step += n
			pos.Steps = steps
			return pos
		}
		pos = Position{Epoch: pos.Epoch + 1, Steps: pos.Steps + max(left, 0)}
	}
	return pos
}
