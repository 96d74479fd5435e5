package allreduce

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/trainer/engine"
)

// Gradient compression on the AllReduce path (--compress, --error-feedback).
//
// The buckets travel as 16-bit values (collectives.Wire: the ring sums in
// float32 and rounds each partial sum it sends on, and each final sum once;
// see collectives/wire.go). The loss sum and correct count, the first
// bucket's last two slots, travel as float32 (Allreducer.ExactTail). With
// fp16 the values are multiplied by a power of two near the global batch
// before rounding and divided after (exact): the gradient is pre-scaled by
// 1/global batch, and this brings it back to the size of a per-sample sum,
// inside fp16's range, as loss scaling does for mixed precision.
//
// Error feedback (Seide et al.'s 1-bit SGD, Karimireddy et al.'s EF-SGD):
// each rank adds its residue to its gradient, rounds the sum to the wire's
// precision itself (what the ring's first hop sends of its values), and
// keeps the difference as the next step's residue. The later hops round
// partial sums of several ranks; that rounding is not fed back (a
// departure from single-node EF, which compresses one vector once).
//
// --compress auto measures at start-up, on the largest bucket, a float32
// and an fp16 AllReduce in turns and takes fp16 where it was faster by 10%
// (compressAuto): on shared memory the conversions cost more than the
// bytes saved; over a slow link they pay.

// gradWire is a job's --compress and --error-feedback state.
type gradWire struct {
	wire    collectives.Wire // WireF32 only where auto chose it
	note    string           // what auto measured
	residue []float32        // this rank's rounding residue (nil: no error feedback)
}

// newGradWire resolves c.Compress ("auto" by measuring: collective).
func newGradWire(j *engine.Job, ar *collectives.Allreducer, plan []bucket, np int) (*gradWire, error) {
	c := j.Cfg
	g := &gradWire{}
	var err error
	if !c.Compresses() || j.Comm.Size() == 1 {
		// On one rank nothing travels: the AllReduce of one buffer is
		// itself, rounded nowhere (and nothing is fed back), and the line
		// before training says fp32.
		return nil, nil
	}
	switch c.Compress {
	case engine.CompressAuto:
		if g.wire, g.note, err = compressAuto(j, ar, plan); err != nil {
			return nil, err
		}
	default:
		if g.wire, err = collectives.ParseWire(c.Compress); err != nil {
			return nil, err
		}
	}
	if c.ErrorFeedback && g.wire != collectives.WireF32 { // auto may choose fp32
		g.residue = make([]float32, np)
	}
	return g, nil
}

// wireScale is fp16's power of two for a step of global batch gb.
func wireScale(gb int) float32 {
	return float32(math.Ldexp(1, int(math.Round(math.Log2(float64(max(gb, 1)))))))
}

// feed adds the residue to grads (the gradient piece at offset lo of the
// whole), rounds it to the wire and keeps what rounding took off.
func (g *gradWire) feed(grads []float32, lo int, scale float32) {
	if g.residue == nil || len(grads) == 0 {
		return
	}
	res := g.residue[lo : lo+len(grads)]
	for i, x := range grads {
		res[i] += x
	}
	copy(grads, res)
	collectives.Round(g.wire, grads, scale)
	for i, x := range grads {
		res[i] -= x
	}
}

// compressAuto times float32 and fp16 AllReduces of the largest bucket in
// turns (5 each after one of each to warm up) and returns fp16 if its
// median was at least 10% below float32's. Every rank gets the same times
// (the mean over ranks) and so the same answer.
func compressAuto(j *engine.Job, ar *collectives.Allreducer, plan []bucket) (collectives.Wire, string, error) {
	n := 0
	for _, b := range plan {
		n = max(n, b.hi-b.lo)
	}
	buf := make([]float32, n)
	const rounds = 6
	times := make([]float32, 2*rounds)
	probe := &collectives.Allreducer{Comm: ar.Comm, Algorithm: ar.Algorithm, SkipLengthCheck: true, Scale: 1}
	for r := range rounds {
		for k, w := range []collectives.Wire{collectives.WireF32, collectives.WireF16} {
			for i := range buf {
				buf[i] = float32(i%97) * 1e-3
			}
			probe.Wire = w
			t0 := time.Now()
			if err := probe.Allreduce(buf, collectives.Sum); err != nil {
				return 0, "", fmt.Errorf("--compress auto: timing an AllReduce: %w", err)
			}
			times[2*r+k] = float32(time.Since(t0).Seconds())
		}
	}
	if err := collectives.Allreduce(j.Comm, times, collectives.Avg, collectives.Tree); err != nil {
		return 0, "", fmt.Errorf("--compress auto: %w", err)
	}
	var f32, f16 []float32
	for r := 1; r < rounds; r++ { // round 0 warms up
		f32, f16 = append(f32, times[2*r]), append(f16, times[2*r+1])
	}
	slices.Sort(f32)
	slices.Sort(f16)
	m32, m16 := f32[len(f32)/2], f16[len(f16)/2]
	w := collectives.WireF32
	if m16 < 0.9*m32 {
		w = collectives.WireF16
	}
	return w, fmt.Sprintf("auto: fp32 %.3g ms, fp16 %.3g ms for %d floats", 1e3*m32, 1e3*m16, n), nil
}

// gatherResidues collects every rank's residue on rank 0, in rank order
// (nil without error feedback; collective).
func (g *gradWire) gatherResidues(c collectives.Comm) ([][]float32, error) {
	if g == nil || g.residue == nil {
		return nil, nil
	}
	mine := g.residue
	if c.Rank() == 0 {
		mine = slices.Clone(mine) // the checkpoint's copy: training goes on
	}
	return engine.GatherAtZero(c, mine, engine.TagResidue, "error-feedback residue")
}
