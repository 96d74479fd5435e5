// Package gossip holds the pure parts of decentralized training (--sync
// dpsgd and adpsgd): the communication graphs, their mixing weights, the
// active/passive split that keeps asynchronous pairwise averaging free of
// deadlock, and AD-PSGD's control protocol (control.go: the epoch clock,
// a passive rank's side). It does no I/O and reads no clock; trainer/decentral's sync_dpsgd.go and sync_adpsgd.go
// wire it to a Comm.
package gossip

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Topology is the shape of the graph ranks average their models over
// (--topology).
type Topology uint8

const (
	// Ring: each rank's neighbours are rank±1 (mod n).
	Ring Topology = iota
	// Torus: the ranks form an r×c grid with wrap-around, r the largest
	// divisor of n not above √n (r ≥ 2); neighbours are up, down, left and
	// right. n must not be prime.
	Torus
	// Exp is the exponential graph: neighbours at distance ±2^k (mod n)
	// for every 2^k < n, so information crosses the graph in O(log n) hops.
	Exp
)

var topologyNames = [...]string{Ring: "ring", Torus: "torus", Exp: "exp"}

// Topologies lists the names --topology accepts.
var Topologies = topologyNames[:]

// String returns the command line's name.
func (t Topology) String() string {
	if int(t) < len(topologyNames) {
		return topologyNames[t]
	}
	return fmt.Sprintf("Topology(%d)", int(t))
}

// ParseTopology reads "ring", "torus" or "exp".
func ParseTopology(s string) (Topology, error) {
	for i, n := range topologyNames {
		if s == n {
			return Topology(i), nil
		}
	}
	return 0, fmt.Errorf("unknown topology %q (want %s)", s, strings.Join(topologyNames[:], ", "))
}

// Set parses s (flag.Value).
func (t *Topology) Set(v string) (err error) { *t, err = ParseTopology(v); return err }

// MarshalText returns the name.
func (t Topology) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText parses a name.
func (t *Topology) UnmarshalText(b []byte) error { return t.Set(string(b)) }

// ErrTopology reports a topology that does not fit the rank count.
var ErrTopology = errors.New("topology does not fit the rank count")

// Graph is an undirected communication graph over ranks 0..N-1:
// Adj[i] lists i's neighbours in increasing order, without i itself and
// without repeats.
type Graph struct {
	N   int
	Adj [][]int
}

// torusShape returns the grid r×c of a torus over n ranks: r the largest
// divisor of n with r ≤ √n. Where there is none, its error gives advice,
// the caller's (which rank counts its graph takes).
func torusShape(n int, advice string) (r, c int, err error) {
	for r = 1; (r+1)*(r+1) <= n; r++ {
	}
	for ; r >= 2; r-- {
		if n%r == 0 {
			return r, n / r, nil
		}
	}
	return 0, 0, fmt.Errorf("torus over %d ranks: %d has no divisor between 2 and √%d, so the ranks do not form a grid (%s): %w", n, n, n, advice, ErrTopology)
}

// New builds topology t over n ranks (D-PSGD's graph).
func New(t Topology, n int) (Graph, error) {
	if n < 1 {
		return Graph{}, fmt.Errorf("graph over %d ranks: %w", n, ErrTopology)
	}
	var offsets func(i int) []int
	switch t {
	case Ring:
		offsets = func(i int) []int { return []int{i - 1, i + 1} }
	case Exp:
		offsets = func(i int) []int {
			var o []int
			for d := 1; d < n; d *= 2 {
				o = append(o, i-d, i+d)
			}
			return o
		}
	case Torus:
		if n == 1 {
			break
		}
		r, c, err := torusShape(n, "use a rank count such as 4, 6, 8, 9, or --topology ring or exp")
		if err != nil {
			return Graph{}, err
		}
		offsets = func(i int) []int {
			y, x := i/c, i%c
			at := func(y, x int) int { return ((y+r)%r)*c + (x+c)%c }
			return []int{at(y-1, x), at(y+1, x), at(y, x-1), at(y, x+1)}
		}
	default:
		return Graph{}, fmt.Errorf("%v: %w", t, ErrTopology)
	}
	g := Graph{N: n, Adj: make([][]int, n)}
	for i := range n {
		if offsets == nil {
			continue
		}
		for _, j := range offsets(i) {
			j = ((j % n) + n) % n
			if j != i {
				g.Adj[i] = append(g.Adj[i], j)
			}
		}
		slices.Sort(g.Adj[i])
		g.Adj[i] = slices.Compact(g.Adj[i])
	}
	return g, nil
}

// Weights returns the Metropolis–Hastings mixing weights of rank i:
// w[k] = 1/(1+max(deg i, deg j)) for its k-th neighbour j = Adj[i][k], and
// self = 1 − Σ w[k]. The matrix they form is symmetric and doubly
// stochastic on every undirected graph (not only regular ones), with a
// positive diagonal, so repeated mixing on a connected graph converges to
// the exact average of the starting models (Lian et al. 2017, D-PSGD's
// assumption on W). On the regular graphs above every weight is
// 1/(deg+1).
func (g Graph) Weights(i int) (self float64, w []float64) {
	self = 1
	for _, j := range g.Adj[i] {
		wj := 1 / float64(1+max(len(g.Adj[i]), len(g.Adj[j])))
		w = append(w, wj)
		self -= wj
	}
	return self, w
}

// Connected says whether every rank can reach every other.
func (g Graph) Connected() bool {
	if g.N == 0 {
		return true
	}
	seen := make([]bool, g.N)
	stack := []int{0}
	seen[0] = true
	count := 1
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, j := range g.Adj[i] {
			if !seen[j] {
				seen[j] = true
				count++
				stack = append(stack, j)
			}
		}
	}
	return count == g.N
}
