package kernelstest

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// testEmbedding checks Embedding (rows copied exactly, a repeated id, an
// id out of range refused with the output untouched) and EmbeddingGrad
// (rows added onto what dtable holds, repeated ids summed in order).
func testEmbedding(t *testing.T, be kernels.Backend) {
	sb, has := kernels.SequenceOf(be)
	if !has {
		t.Skipf("backend %s has no SequenceOps: embeddings do not run on it", be.Name())
	}
	const vocab, cols = 7, 5
	r := newRand(1200)
	table := normals(r, vocab*cols, 1)
	ids := []float32{3, 0, 6, 3, 3, 1}
	n := len(ids)
	tb, ib := load(t, be, table), load(t, be, ids)
	y := loadGuarded(t, be, filled(n*cols, 9))
	ok(t, "Embedding", sb.Embedding(y.buf, ib, tb, n, vocab, cols))
	want := make([]float32, 0, n*cols)
	for _, id := range ids {
		want = append(want, table[int(id)*cols:(int(id)+1)*cols]...)
	}
	checkExact(t, "embedding rows", y.read(t, "Embedding"), want)

	dy := normals(r, n*cols, 1)
	start := normals(r, vocab*cols, 1)
	dt := loadGuarded(t, be, start)
	ok(t, "EmbeddingGrad", sb.EmbeddingGrad(dt.buf, ib, load(t, be, dy), n, vocab, cols))
	wantG := make([]float64, vocab*cols)
	for i, v := range start {
		wantG[i] = float64(v)
	}
	for k, id := range ids {
		for j := range cols {
			wantG[int(id)*cols+j] += float64(dy[k*cols+j])
		}
	}
	checkWithin(t, "embedding gradient", dt.read(t, "EmbeddingGrad"), wantG, perC(wantG, 1e-6))

	// Shapes that do not fit, and (where the backend checks ids) an id
	// outside the table: ErrShape, y untouched.
	bad := load(t, be, []float32{1, 7, 0, 2, 2, 2})
	y2 := loadGuarded(t, be, filled(n*cols, 9))
	wantShapeErrs(t,
		sb.Embedding(y2.buf, ib, tb, n, vocab, cols+1),
		sb.Embedding(y2.buf, ib, tb, n-1, vocab, cols),
		sb.EmbeddingGrad(y2.buf, ib, tb, n, vocab, cols),
	)
	if err := sb.Embedding(y2.buf, bad, tb, n, vocab, cols); err != nil && !errors.Is(err, kernels.ErrShape) {
		t.Errorf("id 7 of 7: %v, want nil or ErrShape", err)
	} else if err != nil {
		checkExact(t, "y after a bad id", y2.read(t, "bad"), filled(n*cols, 9))
	}
}

// attentionShapes: one position, one head, several heads of odd width,
// a transformer's.
var attentionShapes = []struct{ batch, seq, heads, width int }{{1, 1, 1, 2}, {2, 3, 1, 4}, {2, 5, 3, 9}, {3, 17, 4, 32}, {1, 64, 2, 16}}

// testAttention checks Attention and AttentionGrad against float64
// loops, and at scores of about ±1e4, where a softmax that does not
// subtract its row's maximum overflows.
func testAttention(t *testing.T, be kernels.Backend) {
	sb, has := kernels.SequenceOf(be)
	if !has {
		t.Skipf("backend %s has no SequenceOps: attention does not run on it", be.Name())
	}
	for k, s := range attentionShapes {
		for _, sigma := range []float64{1, 300} {
			name := fmt.Sprintf("%+v sigma %v", s, sigma)
			r := newRand(uint64(1300 + k))
			qkv := normals(r, s.batch*s.seq*3*s.width, sigma)
			dy := normals(r, s.batch*s.seq*s.width, 1)
			ref := refAttention(s.batch, s.seq, s.heads, s.width, qkv, dy)
			qb := load(t, be, qkv)
			y := loadGuarded(t, be, filled(len(dy), 7))
			p := loadGuarded(t, be, filled(s.batch*s.heads*s.seq*s.seq, 7))
			ok(t, name, sb.Attention(y.buf, p.buf, qb, s.batch, s.seq, s.heads, s.width))
			tol := 2e-5
			if sigma > 1 {
				tol = 2e-3 // scores of 1e4 in float32: a few units in their last place move e^s
			}
			checkWithin(t, name+": probs", p.read(t, name), ref.p, perC(ref.p, tol))
			checkWithin(t, name+": y", y.read(t, name), ref.y, ref.bound(ref.y, tol))
			dq := loadGuarded(t, be, filled(len(qkv), 7))
			ok(t, name, sb.AttentionGrad(dq.buf, load(t, be, dy), qb, p.buf, s.batch, s.seq, s.heads, s.width))
			checkWithin(t, name+": dqkv", dq.read(t, name), ref.dqkv, ref.bound(ref.dqkv, tol*sigma))
		}
	}
	// Shapes that do not fit (heads not dividing the width, a short
	// qkv): ErrShape, outputs untouched.
	q := load(t, be, filled(2*3*12, 1))
	y, p := loadGuarded(t, be, filled(2*3*4, 5)), loadGuarded(t, be, filled(2*3*3*3, 5))
	wantShapeErrs(t,
		sb.Attention(y.buf, p.buf, q, 2, 3, 3, 4),
		sb.Attention(y.buf, p.buf, q, 2, 3, 3, 5),
		sb.AttentionGrad(q, y.buf, q, p.buf, 2, 3, 3, 4),
	)
	checkExact(t, "y after bad shapes", y.read(t, "bad"), filled(2*3*4, 5))
	checkExact(t, "probs after bad shapes", p.read(t, "bad"), filled(2*3*3*3, 5))
}

// attentionRef is attention in float64: probabilities, output, and the
// gradient given dy.
type attentionRef struct {
	p, y, dqkv []float64
	scale      float64 // the largest |value| of the inputs, for bounds
}

// bound allows tol relative to each value and to the inputs' scale.
func (a attentionRef) bound(v []float64, tol float64) []float64 {
	b := make([]float64, len(v))
	for i, x := range v {
		b[i] = tol * (math.Abs(x) + a.scale)
	}
	return b
}

func refAttention(batch, seq, heads, width int, qkv, dy []float32) attentionRef {
	d := width / heads
	sc := 1 / math.Sqrt(float64(d))
	a := attentionRef{p: make([]float64, batch*heads*seq*seq), y: make([]float64, batch*seq*width), dqkv: make([]float64, len(qkv))}
	for _, v := range qkv {
		a.scale = max(a.scale, math.Abs(float64(v)))
	}
	at := func(b, t, part, h, j int) int { return (b*seq+t)*3*width + part*width + h*d + j }
	for b := range batch {
		for h := range heads {
			p := a.p[(b*heads+h)*seq*seq:]
			for i := range seq {
				top := math.Inf(-1)
				s := make([]float64, i+1)
				for j := range i + 1 {
					for e := range d {
						s[j] += float64(qkv[at(b, i, 0, h, e)]) * float64(qkv[at(b, j, 1, h, e)])
					}
					s[j] *= sc
					top = max(top, s[j])
				}
				sum := 0.0
				for j := range s {
					s[j] = math.Exp(s[j] - top)
					sum += s[j]
				}
				for j := range s {
					p[i*seq+j] = s[j] / sum
					for e := range d {
						a.y[(b*seq+i)*width+h*d+e] += p[i*seq+j] * float64(qkv[at(b, j, 2, h, e)])
					}
				}
				// Backward for row i.
				dp := make([]float64, i+1)
				dot := 0.0
				for j := range i + 1 {
					for e := range d {
						dp[j] += float64(dy[(b*seq+i)*width+h*d+e]) * float64(qkv[at(b, j, 2, h, e)])
					}
					dot += p[i*seq+j] * dp[j]
				}
				for j := range i + 1 {
					ds := p[i*seq+j] * (dp[j] - dot) * sc
					for e := range d {
						a.dqkv[at(b, i, 0, h, e)] += ds * float64(qkv[at(b, j, 1, h, e)])
						a.dqkv[at(b, j, 1, h, e)] += ds * float64(qkv[at(b, i, 0, h, e)])
						a.dqkv[at(b, j, 2, h, e)] += p[i*seq+j] * float64(dy[(b*seq+i)*width+h*d+e])
					}
				}
			}
		}
	}
	return a
}
