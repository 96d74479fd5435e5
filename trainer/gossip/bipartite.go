package gossip

import (
	"fmt"
	"slices"
)

// Bipartite is AD-PSGD's graph (Lian et al., ICML'18, "deadlock
// avoidance"): the ranks split into active ones (even ranks), which start
// every averaging, and passive ones (odd ranks), which only answer, with
// every edge joining an active and a passive rank. An active rank waits
// only for a passive one, and a passive one never waits for anybody while
// it answers, so no cycle of waits, and no deadlock, can form.
type Bipartite struct {
	Graph
}

// Active says whether rank i starts averagings (even ranks).
func (b Bipartite) Active(i int) bool { return i%2 == 0 }

// NewBipartite builds AD-PSGD's version of topology t over n ≥ 2 ranks.
// Edges join ranks an odd distance apart, so that even ranks (active)
// meet only odd ones (passive):
//   - ring: rank±1; with an odd n the wrap-around edge (n−1, 0) would join
//     two even ranks, so the ring is opened into a path there;
//   - exp: rank±d for d = 1, 3, 7, 15, … (2^k − 1 < n). The survey's text
//     has 2^i + 1 hops, which is even for i = 0 and would join two active
//     ranks; we take the odd distances that keep the graph bipartite with
//     the same O(log n) diameter;
//   - torus: an r×c grid whose rows and columns are both even (a torus is
//     bipartite only then), coloured like a chessboard (active: even row +
//     column); otherwise an error.
//
// With an odd n, distances wrap only where they keep parity: an edge
// across the end (i+d ≥ n) is left out.
func NewBipartite(t Topology, n int) (Bipartite, error) {
	if n < 2 {
		return Bipartite{}, fmt.Errorf("asynchronous averaging over %d rank: it needs at least 2 ranks (one active, one passive): %w", n, ErrTopology)
	}
	g := Graph{N: n, Adj: make([][]int, n)}
	add := func(i, j int) {
		if i != j {
			g.Adj[i] = append(g.Adj[i], j)
			g.Adj[j] = append(g.Adj[j], i)
		}
	}
	switch t {
	case Ring, Exp:
		for i := 0; i < n; i++ {
			for d := 1; d < n; d = 2*d + 1 {
				j := i + d
				if j >= n {
					if n%2 == 1 {
						continue
					}
					j -= n
				}
				add(i, j)
				if t == Ring {
					break
				}
			}
		}
	case Torus:
		r, c, err := torusShape(n, "asynchronous averaging needs one with both sides even, e.g. 4, 8, 16 ranks; or use --topology ring or exp")
		if err == nil && (r%2 != 0 || c%2 != 0) {
			err = fmt.Errorf("torus %d×%d over %d ranks is not bipartite (asynchronous averaging needs both sides even, e.g. 4, 8, 16 ranks; or use --topology ring or exp): %w", r, c, n, ErrTopology)
		}
		if err != nil {
			return Bipartite{}, err
		}
		for i := range n {
			y, x := i/c, i%c
			add(i, ((y+1)%r)*c+x)
			add(i, y*c+(x+1)%c)
		}
		// Chessboard colours: renumber so that even ranks are the ones
		// with an even row + column (with c even, rank parity is x
		// parity only, so swap the colour on odd rows).
		perm := make([]int, n)
		for i := range n {
			perm[i] = i
			if (i/c)%2 == 1 {
				perm[i] = (i/c)*c + (i%c ^ 1)
			}
		}
		h := Graph{N: n, Adj: make([][]int, n)}
		for i := range n {
			for _, j := range g.Adj[i] {
				h.Adj[perm[i]] = append(h.Adj[perm[i]], perm[j])
			}
		}
		g = h
	default:
		return Bipartite{}, fmt.Errorf("%v: %w", t, ErrTopology)
	}
	for i := range g.Adj {
		slices.Sort(g.Adj[i])
		g.Adj[i] = slices.Compact(g.Adj[i])
	}
	return Bipartite{g}, nil
}
