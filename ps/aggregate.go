package ps

import (
	"math"
)

// applyPush applies a served push: at once under SSP, ASP and DSSP (each
// worker's gradient scaled by lr alone, Downpour style), or into the current
// round under BSP.
func (s *Server) applyPush(r *request) {
	s.detach()
	if s.bsp != nil {
		s.bsp.contrib[r.worker] = r
		s.completeRounds()
		return
	}
	m := &r.msg
	if f := s.cfg.LRAt; f != nil {
		s.upd.cfg.LR = f(int(m.clock))
	}
	s.upd.cfg.Step = int(m.clock) + 1 // Adam's count: this worker's step
	if !m.kind.keyed() {
		s.upd.dense(int(m.lo)-s.rng.Lo, r.vals)
	} else {
		s.upd.keys(m.keys, s.rng.Lo, r.vals, m.runs)
	}
	s.stats.Updates++
}

// bspRound gathers one BSP round: every worker's push for clock == number.
type bspRound struct {
	number  int        // the round being gathered (= clock of its pushes)
	contrib []*request // per worker, nil if it has not pushed this round
	acc     []float32  // sum of the gradients, per key of the range
	touched []bool     // keys some push of the round carried
	keys    []int      // the touched keys, in first-touch order
	runs    bool       // a push of the round came as runs (message.runs)
	all     bool       // a push of the round covered the whole range
	// A sparse round's keys and averaged gradients, for one StepKeys.
	stepKeys  []int64
	stepGrads []float32
}

func newBSPRound(workers, n int) *bspRound {
	return &bspRound{contrib: make([]*request, workers), acc: make([]float32, n), touched: make([]bool, n)}
}

// completeRounds applies every round that all unfinished workers have
// pushed (the push gate makes that at most one at a time).
func (s *Server) completeRounds() {
	s.detach()
	b := s.bsp
	for {
		m := s.ctl.MinClock()
		if m <= b.number {
			return
		}
		s.applyRound()
		b.number++
		if m == math.MaxInt { // everyone finished: nothing more will come
			return
		}
	}
}

// applyRound sums the round's gradients in worker order (so the result does
// not depend on arrival order), divides by the number of contributions and
// applies one optimizer step to the keys the round's pushes carried. Keys no
// push carried are left alone (no weight decay or momentum step), as for
// sparse gradients; with dense pushes that is no key at all.
func (s *Server) applyRound() {
	b := s.bsp
	n := 0
	for w, r := range b.contrib {
		if r == nil {
			continue
		}
		n++
		m := &r.msg
		if !m.kind.keyed() && len(r.vals) == len(b.acc) {
			// A push of the whole range: a plain (parallel) sum.
			addInto(b.acc, r.vals)
			b.all = true
		} else if !m.kind.keyed() {
			off := int(m.lo) - s.rng.Lo
			acc := b.acc[off : off+len(r.vals)]
			for i, v := range r.vals {
				acc[i] += v
				if !b.touched[off+i] {
					b.touched[off+i] = true
					b.keys = append(b.keys, off+i)
				}
			}
		} else {
			b.runs = b.runs || m.runs
			if !m.runs {
				for i, k := range m.keys {
					j := int(k) - s.rng.Lo
					b.acc[j] += r.vals[i]
					if !b.touched[j] {
						b.touched[j] = true
						b.keys = append(b.keys, j)
					}
				}
			} else {
				keys := m.keys
				for i := 0; i < len(keys); { // a run of consecutive keys: a range
					e := runEnd(keys, i)
					lo := int(keys[i]) - s.rng.Lo
					acc, touched := b.acc[lo:lo+e-i], b.touched[lo:lo+e-i]
					for d, v := range r.vals[i:e] {
						acc[d] += v
						if !touched[d] {
							touched[d] = true
							b.keys = append(b.keys, lo+d)
						}
					}
					i = e
				}
			}
		}
		b.contrib[w] = nil
	}
	if n == 0 {
		return
	}
	if f := s.cfg.LRAt; f != nil {
		s.upd.cfg.LR = f(b.number)
	}
	s.upd.cfg.Step = b.number + 1 // Adam's count: the round's
	scale := float32(n)
	if s.upd.cfg.Kind.PerTensor() && (b.all || len(b.keys) == len(b.acc)) {
		// A per-tensor rule (LARS's trust ratios) needs each tensor's
		// whole gradient: the round's average first, then one dense step.
		divide(b.acc, scale)
		s.upd.dense(0, b.acc)
		clear(b.acc)
		clear(b.touched)
		b.all = false
	} else if b.all || len(b.keys) == len(b.acc) {
		// Dense: one vector step over the range, block by block so that
		// each block is averaged, applied and cleared while in cache.
		n := len(b.acc)
		if n < parallelMin {
			s.roundRange(scale, 0, n)
		} else {
			parallelFor(n, func(lo, hi int) { s.roundRange(scale, lo, hi) })
		}
		b.all = false
	} else {
		// The touched keys in one StepKeys (bit for bit StepAt key by key,
		// in the same first-touch order).
		ks, gs := b.stepKeys[:0], b.stepGrads[:0]
		for _, j := range b.keys {
			ks, gs = append(ks, int64(j)), append(gs, b.acc[j]/scale)
			b.acc[j] = 0
			b.touched[j] = false
		}
		b.stepKeys, b.stepGrads = ks, gs
		s.upd.keys(ks, 0, gs, b.runs)
	}
	b.keys, b.runs = b.keys[:0], false
	s.stats.Updates++
}

// addInto adds vals to acc element by element (split over cores when long).
func addInto(acc, vals []float32) {
	if len(acc) < parallelMin {
		addRange(acc, vals, 0, len(acc))
		return
	}
	parallelFor(len(acc), func(lo, hi int) { addRange(acc, vals, lo, hi) })
}

func addRange(acc, vals []float32, lo, hi int) {
	a := acc[lo:hi]
	for i, v := range vals[lo:hi] {
		a[i] += v
	}
}

// divide divides acc by scale element by element (split over cores when
// long). Dividing by 1 changes nothing, and dividing by a power of two
// gives the same bits as multiplying by its inverse (both are the exact
// quotient, rounded once), which is much cheaper.
func divide(acc []float32, scale float32) {
	if scale == 1 {
		return
	}
	if f, e := math.Frexp(float64(scale)); f == 0.5 && e > -120 && e < 120 {
		inv := float32(math.Ldexp(1, 1-e)) // 1/scale, exactly
		if len(acc) < parallelMin {
			scaleRange(acc, inv, 0, len(acc))
			return
		}
		parallelFor(len(acc), func(lo, hi int) { scaleRange(acc, inv, lo, hi) })
		return
	}
	if len(acc) < parallelMin {
		divideRange(acc, scale, 0, len(acc))
		return
	}
	parallelFor(len(acc), func(lo, hi int) { divideRange(acc, scale, lo, hi) })
}

func divideRange(acc []float32, scale float32, lo, hi int) {
	a := acc[lo:hi]
	for i := range a {
		a[i] /= scale
	}
}

func scaleRange(acc []float32, by float32, lo, hi int) {
	a := acc[lo:hi]
	for i := range a {
		a[i] *= by
	}
}

// roundBlock is how many keys roundRange averages, applies and clears at a
// time (acc, weights and state of a block stay in L1/L2).
const roundBlock = 4096

// roundRange finishes a dense BSP round on the keys [lo, hi) of the range:
// the average (acc / scale), the optimizer step, the accumulator cleared.
// Element-wise, so the bits do not depend on the blocks.
func (s *Server) roundRange(scale float32, lo, hi int) {
	b := s.bsp
	for l := lo; l < hi; l += roundBlock {
		h := min(l+roundBlock, hi)
		acc := b.acc[l:h]
		divideSerial(acc, scale)
		s.upd.denseSerial(l, acc)
		clear(acc)
		clear(b.touched[l:h])
	}
}

// divideSerial is divide on the calling goroutine.
func divideSerial(acc []float32, scale float32) {
	switch f, e := math.Frexp(float64(scale)); {
	case scale == 1:
	case f == 0.5 && e > -120 && e < 120:
		scaleRange(acc, float32(math.Ldexp(1, 1-e)), 0, len(acc))
	default:
		divideRange(acc, scale, 0, len(acc))
	}
}
