package ps

import (
	"testing"
	"time"

	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/kernels/optim"
)

// slowReplica holds server 1's replica headers back for a while.
type slowReplica struct{ *local.Comm }

func (c slowReplica) SendBytes(buf []byte, to, tag int) error {
	if tag == RequestTag && len(buf) > 0 && msgKind(buf[0]) == kindReplica {
		time.Sleep(300 * time.Millisecond)
	}
	return c.Comm.SendBytes(buf, to, tag)
}

// TestHeldAfterFirstRound: after the first round, before the
// neighbour's first replica arrives, Held pairs at the starting round
// (both copies begin there: Keeper.start). The first replication
// overwrote the own copy of the starting round (a reviewer's find).
func TestHeldAfterFirstRound(t *testing.T) {
	cfg := Config{Servers: 2, Consistency: BSP, Optimizer: optim.SGD, LR: 0.1, ReplicateEvery: 1}.withDefaults()
	p := 8
	initial := make([]float32, p)
	keepers := []*Keeper{{}, {}}
	var heldErr error
	var held Held
	world := local.NewWorld(3)
	world.SetTimeout(10 * time.Second)
	errs := world.Run(func(c *local.Comm) error {
		if c.Rank() < 2 {
			var tr Transport = c
			if c.Rank() == 1 {
				tr = slowReplica{c}
			}
			_, err := RunServerKeeping(tr, cfg, initial, keepers[c.Rank()])
			return err
		}
		w, err := NewWorker(c, cfg, p)
		if err != nil {
			return err
		}
		grad, model := make([]float32, p), make([]float32, p)
		for i := range grad {
			grad[i] = 1
		}
		if err := w.Push(grad); err != nil {
			return err
		}
		_ = model
		k := keepers[0]
		for {
			k.mu.Lock()
			own := max(k.own[0].clock, k.own[1].clock)
			k.mu.Unlock()
			if own == 1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		held, heldErr = k.Held() // server 1's replica of round 1 still on its way
		return w.Done()
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if heldErr != nil {
		t.Errorf("DEFECT: %v", heldErr)
	} else {
		t.Logf("held at round %d", held.Clock)
	}
}
