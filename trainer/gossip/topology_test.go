package gossip

import (
	"errors"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// checkUndirected: no self loops, no repeats, j ∈ Adj[i] ⇔ i ∈ Adj[j].
func checkUndirected(t *testing.T, g Graph) {
	t.Helper()
	for i, adj := range g.Adj {
		if !slices.IsSorted(adj) || len(slices.Compact(slices.Clone(adj))) != len(adj) {
			t.Errorf("rank %d: neighbours %v not sorted and distinct", i, adj)
		}
		for _, j := range adj {
			if j == i || j < 0 || j >= g.N {
				t.Errorf("rank %d: bad neighbour %d", i, j)
			} else if !slices.Contains(g.Adj[j], i) {
				t.Errorf("edge %d→%d has no %d→%d", i, j, j, i)
			}
		}
	}
}

func TestGraphs(t *testing.T) {
	want := map[Topology]map[int][][]int{
		Ring: {1: {nil}, 2: {{1}, {0}}, 3: {{1, 2}, {0, 2}, {0, 1}}, 5: {{1, 4}, {0, 2}, {1, 3}, {2, 4}, {0, 3}}},
		Exp:  {5: {{1, 2, 3, 4}, {0, 2, 3, 4}, {0, 1, 3, 4}, {0, 1, 2, 4}, {0, 1, 2, 3}}, 8: {{1, 2, 4, 6, 7}}},
		// 6 = 2×3: rank 0 is (0,0); up/down is rank 3, left/right 2 and 1.
		Torus: {6: {{1, 2, 3}}, 9: {{1, 2, 3, 6}}, 4: {{1, 2}, {0, 3}, {0, 3}, {1, 2}}},
	}
	for top, cases := range want {
		for n, adj := range cases {
			g, err := New(top, n)
			if err != nil {
				t.Fatalf("%v n=%d: %v", top, n, err)
			}
			for i, a := range adj {
				if !slices.Equal(g.Adj[i], a) {
					t.Errorf("%v n=%d rank %d: neighbours %v, want %v", top, n, i, g.Adj[i], a)
				}
			}
		}
	}
	for _, top := range []Topology{Ring, Exp, Torus} {
		for n := 1; n <= 17; n++ {
			g, err := New(top, n)
			if top == Torus && n > 1 && isPrime(n) {
				if !errors.Is(err, ErrTopology) {
					t.Errorf("torus over prime %d: err %v, want ErrTopology", n, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%v n=%d: %v", top, n, err)
			}
			checkUndirected(t, g)
			if !g.Connected() {
				t.Errorf("%v n=%d not connected", top, n)
			}
			checkDoublyStochastic(t, g)
		}
	}
}

func isPrime(n int) bool {
	for d := 2; d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return n >= 2
}

// checkDoublyStochastic: the Metropolis weights form a symmetric matrix
// whose rows (and so columns) sum to 1, with a positive diagonal.
func checkDoublyStochastic(t *testing.T, g Graph) {
	t.Helper()
	w := make([][]float64, g.N)
	for i := range g.N {
		w[i] = make([]float64, g.N)
		self, ws := g.Weights(i)
		if !(self > 0) {
			t.Errorf("n=%d rank %d: self weight %v", g.N, i, self)
		}
		w[i][i] = self
		for k, j := range g.Adj[i] {
			w[i][j] = ws[k]
		}
	}
	for i := range g.N {
		row, col := 0.0, 0.0
		for j := range g.N {
			row += w[i][j]
			col += w[j][i]
			if w[i][j] != w[j][i] {
				t.Errorf("n=%d: W[%d][%d]=%v ≠ W[%d][%d]=%v", g.N, i, j, w[i][j], j, i, w[j][i])
			}
		}
		if math.Abs(row-1) > 1e-12 || math.Abs(col-1) > 1e-12 {
			t.Errorf("n=%d rank %d: row sum %v, column sum %v", g.N, i, row, col)
		}
	}
}

func TestMixingConvergesToAverage(t *testing.T) {
	// Repeated mixing (D-PSGD with a zero gradient) reaches the exact
	// average of the starting values on every graph.
	for _, top := range []Topology{Ring, Exp, Torus} {
		for _, n := range []int{2, 4, 5, 8} {
			g, err := New(top, n)
			if err != nil {
				continue // torus over 2 or 5
			}
			x := make([]float64, n)
			avg := 0.0
			for i := range x {
				x[i] = float64(i*i) - 3.5*float64(i%3)
				avg += x[i] / float64(n)
			}
			for range 2000 {
				nx := make([]float64, n)
				for i := range n {
					self, ws := g.Weights(i)
					nx[i] = self * x[i]
					for k, j := range g.Adj[i] {
						nx[i] += ws[k] * x[j]
					}
				}
				x = nx
			}
			for i := range x {
				if math.Abs(x[i]-avg) > 1e-9 {
					t.Errorf("%v n=%d rank %d: %v after mixing, want the average %v", top, n, i, x[i], avg)
				}
			}
		}
	}
}

func TestBipartite(t *testing.T) {
	for _, top := range []Topology{Ring, Exp, Torus} {
		for n := 2; n <= 17; n++ {
			b, err := NewBipartite(top, n)
			if top == Torus {
				r, c, terr := torusShape(n, "")
				if terr != nil || r%2 != 0 || c%2 != 0 {
					if !errors.Is(err, ErrTopology) {
						t.Errorf("torus n=%d: err %v, want ErrTopology", n, err)
					}
					// The counts the refusal suggests are ones it takes.
					m := regexp.MustCompile(`e\.g\. ([0-9, ]+) ranks`).FindStringSubmatch(err.Error())
					if m == nil {
						t.Errorf("torus n=%d: %v suggests no rank count", n, err)
						continue
					}
					for _, f := range strings.Split(m[1], ",") {
						k, _ := strconv.Atoi(strings.TrimSpace(f))
						if _, err := NewBipartite(Torus, k); err != nil {
							t.Errorf("torus n=%d suggests %d ranks, which it refuses: %v", n, k, err)
						}
					}
					continue
				}
			}
			if err != nil {
				t.Fatalf("%v n=%d: %v", top, n, err)
			}
			checkUndirected(t, b.Graph)
			if !b.Connected() {
				t.Errorf("%v n=%d: not connected: %v", top, n, b.Adj)
			}
			for i, adj := range b.Adj {
				for _, j := range adj {
					if b.Active(i) == b.Active(j) {
						t.Errorf("%v n=%d: edge %d–%d joins two %s ranks", top, n, i, j, map[bool]string{true: "active", false: "passive"}[b.Active(i)])
					}
				}
				if len(adj) == 0 {
					t.Errorf("%v n=%d: rank %d has no partner", top, n, i)
				}
			}
		}
	}
	if _, err := NewBipartite(Ring, 1); !errors.Is(err, ErrTopology) {
		t.Errorf("1 rank: err %v, want ErrTopology", err)
	}
	if b, _ := NewBipartite(Exp, 8); !slices.Equal(b.Adj[0], []int{1, 3, 5, 7}) {
		t.Errorf("exp n=8 rank 0: %v, want [1 3 5 7]", b.Adj[0])
	}
}

func TestParseTopology(t *testing.T) {
	for _, s := range Topologies {
		top, err := ParseTopology(s)
		if err != nil || top.String() != s {
			t.Errorf("%q: %v %v", s, top, err)
		}
	}
	if _, err := ParseTopology("mesh"); err == nil {
		t.Error("mesh parsed")
	}
}
