package paramserver

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/ckpt"
	"github.com/dml-project/dml/trainer/engine"
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
// With three servers or more no server holds every range (each holds
// two): each survivor writes what it holds, at every round it holds it,
// as parts (ckpt-s<steps>.part-r<rank>.npz), and the resume joins the
// parts of the newest step whose parts hold every key (joinParts). A
// worker's death leaves every server alive: every range is there. A
// server's leaves its range with the previous server.
//
// Departures, said in the metadata's emergency record and in the error
// when nothing is written: a model with batch-norm statistics
// (which are the workers') and the sigmod filter's residues (also the
// workers') are not written either. Under ssp, asp and dssp the ranges
// are at whatever updates each server had (there is no common round to
// pair them at: the copy is as stale as the replication interval), and
// the checkpoint's step is the slowest worker's.

// serverWord keeps what a server's LastWord needs.
type serverWord struct {
	j     *engine.Job
	arch  model.Arch
	p     int // model length
	k     *ps.Keeper
	start engine.Position
}

// keepServerWord makes this server rank keep its last word, when the job
// writes emergency checkpoints; it returns the keeper RunServerKeeping
// fills (nil: none).
func keepServerWord(j *engine.Job, arch model.Arch, p int, start engine.Position) *ps.Keeper {
	if !j.KeepsLastWord() {
		return nil
	}
	w := &serverWord{j: j, arch: arch, p: p, k: &ps.Keeper{}, start: start}
	j.KeepEmergencyWriter(w)
	return w.k
}

// Write is LastWord for a server: the whole state when this server
// holds every range at a round, else its parts (one file per round it
// holds ranges at), which the resume joins with the other survivors'.
func (w *serverWord) Write(e engine.Emergency) (string, int, error) {
	j := w.j
	switch {
	case residueFilters(j) > 0:
		return "", 0, fmt.Errorf("%w: the sigmod filter's residues are the workers'", engine.ErrNoLastWord)
	case w.arch.NumState() > 0:
		return "", 0, fmt.Errorf("%w: the batch-norm statistics are the workers'", engine.ErrNoLastWord)
	case j.Cfg.PS.Downpour():
		// The rounds count pushes, not steps, and the workers hold
		// gradients not yet pushed (downpour.go).
		return "", 0, fmt.Errorf("%w: with Config.PS.FetchEvery or Config.PS.PushEvery above 1 the workers hold gradients not yet pushed", engine.ErrNoLastWord)
	}
	rounds, err := w.k.HeldRounds()
	if err != nil {
		return "", 0, fmt.Errorf("%w: %v", engine.ErrNoLastWord, err)
	}
	e.WrittenBy = j.Comm.Rank()
	e.Time = time.Now().UTC().Format(time.RFC3339Nano)
	for _, h := range rounds {
		if held(h) == w.p {
			return w.writeHeld(h, e, false)
		}
	}
	// Parts, the newest round's first (the one said: the most useful if
	// this rank is ended while it writes).
	path, steps := "", 0
	for i, h := range rounds {
		p, s, err := w.writeHeld(h, e, true)
		if err != nil {
			return "", 0, err
		}
		if i == 0 {
			path, steps = p, s
		}
	}
	return path, steps, nil
}

// held is how many keys h holds.
func held(h ps.Held) int {
	n := 0
	for _, r := range h.Ranges {
		n += r.Range.Len()
	}
	return n
}

// writeHeld writes the ranges of h as a checkpoint (whole) or a part of
// one, and returns its path and steps. A checkpoint of the same steps
// already there is kept.
func (w *serverWord) writeHeld(h ps.Held, e engine.Emergency, part bool) (string, int, error) {
	j := w.j
	c := &ckpt.File{State: model.State{Params: make([]float32, w.p)}}
	per := j.Cfg.Opt.Kind.StatePer()
	if per > 0 {
		c.Opt = make([]float32, per*w.p)
	}
	for _, r := range h.Ranges {
		copy(c.Params[r.Range.Lo:r.Range.Hi], r.Weights)
		if c.Opt != nil {
			copy(c.Opt[per*r.Range.Lo:per*r.Range.Hi], r.OptState)
		}
		if part {
			e.Held = append(e.Held, [2]int{r.Range.Lo, r.Range.Hi})
		}
	}
	e.Part = part
	pos := j.PositionAfter(w.start, h.Clock)
	path := filepath.Join(j.Checkpoint.Dir, ckpt.Name(pos.Steps))
	if _, err := os.Stat(path); err == nil {
		return path, pos.Steps, nil
	}
	if part {
		path = filepath.Join(j.Checkpoint.Dir, engine.PartName(pos.Steps, j.Comm.Rank()))
	}
	return j.WriteEmergency(path, c, w.arch, pos, e)
}
