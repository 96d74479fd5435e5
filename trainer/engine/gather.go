package engine

import (
	"fmt"

	"github.com/dml-project/dml/collectives"
)

// GatherAtZero collects every rank's mine (all of one length) on rank 0,
// in rank order, mine itself first; the other ranks send theirs and get
// nil. what names it in errors ("model": "receiving rank 2's model").
func GatherAtZero(c collectives.Comm, mine []float32, tag int, what string) ([][]float32, error) {
	if c.Rank() != 0 {
		if err := collectives.Send(c, mine, 0, tag); err != nil {
			return nil, fmt.Errorf("checkpoint: sending this rank's %s to rank 0: %w", what, err)
		}
		return nil, nil
	}
	out := [][]float32{mine}
	for q := 1; q < c.Size(); q++ {
		v := make([]float32, len(mine))
		if err := collectives.Recv(c, v, q, tag); err != nil {
			return nil, fmt.Errorf("checkpoint: receiving rank %d's %s: %w", q, what, err)
		}
		out = append(out, v)
	}
	return out, nil
}
