package collectives_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/local"
)

func init() { local.AbortExits = false }

// p2pOnly hides everything of a Comm but PointToPoint, so the algorithms
// below provably need nothing else (byte messages, Barrier, Abort).
type p2pOnly struct{ c collectives.PointToPoint }

func (p p2pOnly) Rank() int { return p.c.Rank() }
func (p p2pOnly) Size() int { return p.c.Size() }
func (p p2pOnly) Isend(buf []float32, to, tag int) (collectives.Request, error) {
	return p.c.Isend(buf, to, tag)
}
func (p p2pOnly) Irecv(buf []float32, from, tag int) (collectives.Request, error) {
	return p.c.Irecv(buf, from, tag)
}

// TestAlgorithmsOverPointToPoint runs every algorithm over a transport that
// has only Rank, Size, Isend and Irecv, with different data on every rank.
func TestAlgorithmsOverPointToPoint(t *testing.T) {
	for _, n := range []int{1, 3, 4} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			const m = 37 // not a multiple of any rank count
			w := local.NewWorld(n)
			w.SetTimeout(30 * time.Second)
			errs := w.Run(func(lc *local.Comm) error {
				c := p2pOnly{lc}
				r := c.Rank()
				for _, algo := range []collectives.Algorithm{collectives.Ring, collectives.Tree, collectives.Auto} {
					buf := make([]float32, m)
					for i := range buf {
						buf[i] = float32(r*m + i)
					}
					if err := collectives.NewAllreducer(c, algo).Allreduce(buf, collectives.Sum); err != nil {
						return err
					}
					for i, v := range buf {
						want := float32(n*i + m*n*(n-1)/2)
						if v != want {
							return fmt.Errorf("%s: [%d] = %v, want %v", algo, i, v, want)
						}
					}
				}
				b := make([]float32, m)
				if r == n-1 {
					for i := range b {
						b[i] = float32(i + 1)
					}
				}
				if err := collectives.Broadcast(c, b, n-1); err != nil {
					return err
				}
				if b[m-1] != m {
					return fmt.Errorf("broadcast: [%d] = %v, want %d", m-1, b[m-1], m)
				}
				all := make([]float32, 2*n)
				if err := collectives.Allgather(c, []float32{float32(r), float32(-r)}, all); err != nil {
					return err
				}
				for i := range n {
					if all[2*i] != float32(i) || all[2*i+1] != float32(-i) {
						return fmt.Errorf("allgather: block %d = %v", i, all[2*i:2*i+2])
					}
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}
