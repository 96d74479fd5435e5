package model

import "slices"

// The rows a batch's gradient cannot reach. An embedding's gradient is
// the batch's output gradients added into the rows its tokens name: every
// other row of the table gets zero (unless a tied head also reads the
// table: the head's gradient reaches every row). A position table's rows
// past the sequence get zero as well. The parameter server was designed
// for such gradients (Li et al.: a worker pushes the keys its mini-batch
// touched), and its servers then step only the rows pushed: an embedding
// row no batch named keeps its weight, its momentum and its Adam moments,
// as PyTorch's sparse embeddings under SparseAdam do.

// hole is a range of parameter keys [lo, hi) the batch's gradient is zero
// on.
type hole struct{ lo, hi int }

// SparseWeights is how many weights lie in rows that a batch's gradient
// may leave at 0 (SparseKeys): the tables of the embeddings no tied head
// reads, and a position table's rows past the sequence.
func (m *Model) SparseWeights() int {
	n := 0
	for i, nd := range m.nodes {
		switch {
		case nd.Kind == KindEmbedding && !m.sq.tied[i]: // embedding's setup noted the tied ones
			n += nd.Rows * nd.Out
		case nd.Kind == KindPosEmbed && nd.Rows > nd.in.T:
			n += (nd.Rows - nd.in.T) * nd.Out
		}
	}
	return n
}

// SparseKeys appends to dst, ascending, the keys (indices into the
// parameters) of the last loaded batch's gradient that may be non-zero:
// every key but the rows of the sparse tables (SparseWeights) that the
// batch does not reach. A key it leaves out has a gradient of exactly 0.
func (m *Model) SparseKeys(dst []int64) []int64 {
	holes := m.holes()
	at := 0
	for _, h := range holes {
		for k := at; k < h.lo; k++ {
			dst = append(dst, int64(k))
		}
		at = h.hi
	}
	for k := at; k < m.NumParams(); k++ {
		dst = append(dst, int64(k))
	}
	return dst
}

// holes lists, ascending, the rows of the sparse tables the batch loaded
// does not reach: those no token names, those past the sequence.
func (m *Model) holes() []hole {
	var holes []hole
	var seen []bool
	for i, n := range m.nodes {
		if n.param < 0 {
			continue
		}
		l := m.layers[n.param]
		rows := func(from, to int) { // rows [from, to) of the table
			if from < to {
				holes = append(holes, hole{l.WOff + from*n.Out, l.WOff + to*n.Out})
			}
		}
		switch {
		case n.Kind == KindEmbedding && !m.sq.tied[i]:
			seen = slices.Grow(seen[:0], n.Rows)[:n.Rows]
			clear(seen)
			for _, t := range m.batchTokens[:m.tokens(n)] {
				if k := int(t); k >= 0 && k < n.Rows { // the data's check holds them so
					seen[k] = true
				}
			}
			for r := 0; r < n.Rows; {
				if seen[r] {
					r++
					continue
				}
				e := r + 1
				for e < n.Rows && !seen[e] {
					e++
				}
				rows(r, e)
				r = e
			}
		case n.Kind == KindPosEmbed:
			rows(n.in.T, n.Rows)
		}
	}
	slices.SortFunc(holes, func(a, b hole) int { return a.lo - b.lo })
	return holes
}
