package collectives

import (
	"fmt"
	"slices"
)

// Group is a PointToPoint over some ranks of c (MPI's communicator of a
// group): its rank i is c's rank ranks[i], so that a collective of this
// package runs among those ranks alone while the others go on with their
// own traffic (the parameter server's workers reduce batch-norm
// statistics while its servers serve). Messages travel on c under the
// tags the collectives use; the other ranks must not receive those tags
// from these ranks meanwhile (CONVENTIONS' tag registry: tags.go). It
// numbers its own collectives (Sequencer: c's numbers count the world's,
// which the other ranks do not run) and names its operations to c's stall
// inspector (OpMarker). Errors name c's ranks.
type Group struct {
	c     PointToPoint
	ranks []int
	me    int
	seq   uint64
	label string // " in a group of N ranks", for the stall inspector
}

// NewGroup returns the group of ranks (ascending, each once, c's own
// among them), or an error naming what is wrong.
func NewGroup(c PointToPoint, ranks []int) (*Group, error) {
	me := slices.Index(ranks, c.Rank())
	for i, r := range ranks {
		if r < 0 || r >= c.Size() || i > 0 && r <= ranks[i-1] {
			return nil, fmt.Errorf("collectives: group %v of %d ranks: want ascending ranks in [0, %d), each once: %w", ranks, c.Size(), c.Size(), ErrBadRank)
		}
	}
	if me < 0 {
		return nil, fmt.Errorf("collectives: group %v: rank %d is not in it: %w", ranks, c.Rank(), ErrBadRank)
	}
	return &Group{c: c, ranks: slices.Clone(ranks), me: me, label: fmt.Sprintf(" in a group of %d ranks", len(ranks))}, nil
}

func (g *Group) Rank() int { return g.me }
func (g *Group) Size() int { return len(g.ranks) }

func (g *Group) Isend(buf []float32, to, tag int) (Request, error) {
	if to < 0 || to >= len(g.ranks) {
		return nil, fmt.Errorf("collectives: send to rank %d of a group of %d: %w", to, len(g.ranks), ErrBadRank)
	}
	return g.c.Isend(buf, g.ranks[to], tag)
}

func (g *Group) Irecv(buf []float32, from, tag int) (Request, error) {
	if from < 0 || from >= len(g.ranks) {
		return nil, fmt.Errorf("collectives: receive from rank %d of a group of %d: %w", from, len(g.ranks), ErrBadRank)
	}
	return g.c.Irecv(buf, g.ranks[from], tag)
}

// NextCollective: see Sequencer (the group's own count).
func (g *Group) NextCollective() uint64 {
	g.seq++
	return g.seq
}

// EnterOp: see OpMarker (c's inspector, the operation named as the
// group's).
func (g *Group) EnterOp(name string) {
	if m := opMarker(g.c); m != nil {
		m.EnterOp(name + g.label)
	}
}

// SetStep: see OpMarker.
func (g *Group) SetStep(step int) {
	if m := opMarker(g.c); m != nil {
		m.SetStep(step)
	}
}
