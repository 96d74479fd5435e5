package ps

import (
	"fmt"
	"slices"
)

// Checkpoints of the servers' state. The servers hold the weights and the
// optimizer state (momentum buffer, Adagrad sums) of their key ranges, so a
// checkpoint asks them for it: Worker.Snapshot sends each server a
// snapshot request, which the server treats like a pull (it is held until
// the consistency model lets the worker start its next iteration) and
// answers with a values reply of its range's weights followed, when the
// optimizer has state, by that state. Under BSP, a snapshot sent after the
// worker's push of step t is answered once round t is applied, and before
// any push of step t+1 can be (the round needs this worker's push, which
// comes after the snapshot): the state is exactly the state after step t.
//
// Restoring is Config.Restore: NewServer starts from the checkpoint's
// weights (its initial argument), optimizer state and clock, and
// Worker.Resume sets a worker's clock and its filters' residues.
//
//	snapshot   kind=9 | clock u32     (answered with values: weights, then state)

// kindSnapshot asks a server for its range's weights and optimizer state.
const kindSnapshot msgKind = 9

func init() { kindNames[kindSnapshot] = "snapshot" }

func appendSnapshot(b []byte, clock uint32) []byte {
	return appendU32(append(b, byte(kindSnapshot)), clock)
}

// Restore is where servers and workers resume from (a checkpoint's state).
type Restore struct {
	// OptState is the optimizer state of the whole model (length P), or nil
	// for an optimizer without state (SGD).
	OptState []float32
	// Clock is every worker's clock: the number of pushes each has made
	// (under BSP, the steps run).
	Clock int
}

// restore puts the checkpoint's optimizer state and clocks into a new
// server (before it has served anything). Its weights came in NewServer's
// initial argument.
func (s *Server) restore(r *Restore, p int) error {
	if r.Clock < 0 {
		return fmt.Errorf("ps: restore: clock %d < 0: %w", r.Clock, ErrConfig)
	}
	switch {
	case s.upd.state == nil && r.OptState != nil:
		return fmt.Errorf("ps: restore: %d floats of optimizer state, but %v keeps none: %w", len(r.OptState), s.cfg.Optimizer, ErrConfig)
	case s.upd.state != nil && len(r.OptState) != s.cfg.Optimizer.StatePer()*p:
		return fmt.Errorf("ps: restore: %d floats of optimizer state for a model of %d keys (%v keeps %d a key): %w", len(r.OptState), p, s.cfg.Optimizer, s.cfg.Optimizer.StatePer(), ErrConfig)
	}
	if per := s.cfg.Optimizer.StatePer(); s.upd.state != nil {
		copy(s.upd.state, r.OptState[per*s.rng.Lo:per*s.rng.Hi])
	}
	setClocks(s.ctl, r.Clock)
	s.startClock = r.Clock
	if s.bsp != nil {
		s.bsp.number = r.Clock
	}
	return nil
}

// setClocks sets every worker's clock in a controller.
func setClocks(ctl Controller, clock int) {
	var c *clocks
	switch x := ctl.(type) {
	case *SSPController:
		c = &x.clocks
	case *ASPController:
		c = &x.clocks
	case *DSSPController:
		c = &x.clocks
	default:
		panic(fmt.Sprintf("ps: setClocks: unknown controller %T", ctl))
	}
	for w := range c.clock {
		c.clock[w] = clock
	}
}

// serveSnapshot answers a snapshot request that may proceed: the range's
// weights, then its optimizer state (if any), as one inline values reply.
func (s *Server) serveSnapshot(r *request) {
	vals := slices.Clone(s.upd.w)
	vals = append(vals, s.upd.state...)
	s.emit(s.workerRank(r.worker), appendValuesReply(s.next(), 0, 0, vals))
}

// Snapshot fills weights (length P) with every server's weights and, when
// the optimizer has state, optState (length P; nil otherwise) with its
// state, as they are once the consistency model lets this worker start its
// next iteration (under BSP: after the round of its latest push). It does
// not move the worker's clock.
func (w *Worker) Snapshot(weights, optState []float32) error {
	sp := w.cfg.Optimizer.StatePer() // state floats per key
	stateful := sp > 0
	if len(weights) != w.p || stateful && len(optState) != sp*w.p || !stateful && optState != nil {
		return fmt.Errorf("ps worker rank %d: snapshot into %d weights and %d state values, model has %d (optimizer %v): %w",
			w.rank, len(weights), len(optState), w.p, w.cfg.Optimizer, ErrArgument)
	}
	per := 1 + sp
	var buf []float32
	return w.exchange("snapshot", func(_ int, b []byte) []byte { return appendSnapshot(b, uint32(w.clock)) },
		func(i int, m *message) error {
			r := w.ranges[i]
			if err := w.expect(i, m, kindValues, per*r.Len()); err != nil {
				return err
			}
			buf = slices.Grow(buf[:0], per*r.Len())[:per*r.Len()]
			m.floatsInto(buf)
			copy(weights[r.Lo:r.Hi], buf[:r.Len()])
			if stateful {
				copy(optState[sp*r.Lo:sp*r.Hi], buf[r.Len():])
			}
			return nil
		})
}

// Resume sets a new worker's clock (the pushes it made before the
// checkpoint it resumes from: the servers were restored with the same) and,
// for each of its filters that keeps a residue (sigmod), that residue
// (residues[i] for filter i; nil entries and filters without residue are
// skipped). Call it before the first Pull or Push.
func (w *Worker) Resume(clock int, residues [][]float32) error {
	if clock < 0 {
		return fmt.Errorf("ps worker rank %d: resume at clock %d: %w", w.rank, clock, ErrArgument)
	}
	for i, r := range residues {
		if r == nil {
			continue
		}
		if i >= len(w.filters) {
			return fmt.Errorf("ps worker rank %d: resume: residue for filter %d, the worker has %d filters: %w", w.rank, i, len(w.filters), ErrArgument)
		}
		dst := Residue(w.filters[i])
		if dst == nil || len(dst) != len(r) {
			return fmt.Errorf("ps worker rank %d: resume: a residue of %d values for filter %d (%d): %w", w.rank, len(r), i, len(dst), ErrArgument)
		}
		copy(dst, r)
	}
	w.clock = clock
	return nil
}
