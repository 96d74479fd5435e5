package local

import (
	"testing"

	"github.com/dml-project/dml/collectives"
)

// TestWireHalvesBytes: a 16-bit wire sends half the ring's bytes, plus
// the exact tail's words (counted at Isend, on the in-process transport).
func TestWireHalvesBytes(t *testing.T) {
	const n, l, tail = 3, 30001, 2
	sent := func(w collectives.Wire) int64 {
		world := NewWorld(n)
		counts := make([]int64, n)
		errs := world.Run(func(c *Comm) error {
			cc := &countingPP{PointToPoint: c}
			ar := &collectives.Allreducer{Comm: cc, Wire: w, ExactTail: tail, Algorithm: collectives.Ring, SkipLengthCheck: true}
			buf := make([]float32, l)
			for i := range buf {
				buf[i] = float32(i % 17)
			}
			err := ar.Allreduce(buf, collectives.Sum)
			counts[c.Rank()] = cc.bytes
			return err
		})
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		return counts[0] + counts[1] + counts[2]
	}
	f32, f16 := sent(collectives.WireF32), sent(collectives.WireF16)
	words := int64((l-tail+1)/2 + tail)
	if want := 4 * words * 2 * (n - 1); f16 != want || f32 != 4*l*2*(n-1) {
		t.Fatalf("bytes sent by the ring: fp16 %d (want %d), fp32 %d (want %d)", f16, want, f32, 4*l*2*(n-1))
	}
}

type countingPP struct {
	collectives.PointToPoint
	bytes int64
}

func (c *countingPP) Isend(buf []float32, to, tag int) (collectives.Request, error) {
	c.bytes += 4 * int64(len(buf))
	return c.PointToPoint.Isend(buf, to, tag)
}

// BenchmarkWireAllreduce: the ring on 2 in-process ranks (channels, one
// copy per message) at the 784-1024³-10 MLP's gradient size, per wire: what
// the conversions cost where bytes are cheap.
//
//	go test -run XXX -bench WireAllreduce ./collectives/local/
func BenchmarkWireAllreduce(b *testing.B) {
	const n = 2913292
	for _, w := range []collectives.Wire{collectives.WireF32, collectives.WireF16, collectives.WireBF16} {
		b.Run(w.String(), func(b *testing.B) {
			world := NewWorld(2)
			bufs := [2][]float32{make([]float32, n), make([]float32, n)}
			b.SetBytes(4 * n)
			b.ResetTimer()
			errs := world.Run(func(c *Comm) error {
				ar := &collectives.Allreducer{Comm: c, Wire: w, Scale: 256, ExactTail: 2, Algorithm: collectives.Ring, SkipLengthCheck: true}
				buf := bufs[c.Rank()]
				for range b.N {
					for i := range buf {
						buf[i] = float32(i%101) * 1e-4
					}
					if err := ar.Allreduce(buf, collectives.Sum); err != nil {
						return err
					}
				}
				return nil
			})
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
