//go:build cuda

package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
)

// fakeAttn is attnDevice on the host: one arena of floats addressed as
// the device would be (base + 4·index), cuBLAS's column-major strided
// batched product written out, and the row kernels' definitions.
type fakeAttn struct {
	mem  []float32
	base devPtr
}

func (f *fakeAttn) alloc(vals []float32) devPtr {
	p := f.base + devPtr(4*len(f.mem))
	f.mem = append(f.mem, vals...)
	f.mem = append(f.mem, float32(math.NaN())) // a guard between buffers: read, it poisons
	return p
}

func (f *fakeAttn) idx(p devPtr) int { return int(p-f.base) / 4 }

func (f *fakeAttn) gemm(g stridedGemm) error {
	for q := range g.count {
		a, b, c := f.idx(g.a)+q*g.sa, f.idx(g.b)+q*g.sb, f.idx(g.c)+q*g.sc
		for j := range g.n {
			for i := range g.m {
				var s float64
				for l := range g.k {
					av := f.mem[a+i+l*g.lda]
					if g.ta {
						av = f.mem[a+l+i*g.lda]
					}
					bv := f.mem[b+l+j*g.ldb]
					if g.tb {
						bv = f.mem[b+j+l*g.ldb]
					}
					s += float64(av) * float64(bv)
				}
				v := float64(g.alpha) * s
				if g.beta != 0 {
					v += float64(g.beta) * float64(f.mem[c+i+j*g.ldc])
				}
				f.mem[c+i+j*g.ldc] = float32(v)
			}
		}
	}
	return nil
}

func (f *fakeAttn) softmaxRows(p devPtr, rows, seq int) error {
	for r := range rows {
		row, n := f.mem[f.idx(p)+r*seq:][:seq], r%seq+1
		top := math.Inf(-1)
		for _, v := range row[:n] {
			top = math.Max(top, float64(v))
		}
		var s float64
		for _, v := range row[:n] {
			s += math.Exp(float64(v) - top)
		}
		for j := range row {
			if j < n {
				row[j] = float32(math.Exp(float64(row[j])-top) / s)
			} else {
				row[j] = 0
			}
		}
	}
	return nil
}

func (f *fakeAttn) dsRows(ds, p devPtr, rows, seq int) error {
	for r := range rows {
		dr, pr, n := f.mem[f.idx(ds)+r*seq:][:seq], f.mem[f.idx(p)+r*seq:][:seq], r%seq+1
		var dot float64
		for j := range n {
			dot += float64(pr[j]) * float64(dr[j])
		}
		for j := range dr {
			if j < n {
				dr[j] = float32(float64(pr[j]) * (float64(dr[j]) - dot))
			} else {
				dr[j] = 0
			}
		}
	}
	return nil
}

// TestAttentionLibraryRoute checks, without a GPU, the products and row
// kernels the cuBLAS route queues (every stride, leading dimension and
// transposition as cublasSgemmStridedBatched reads them) against the CPU
// backend's attention, forward and backward, on shapes whose head width,
// sequence length and head count all differ.
func TestAttentionLibraryRoute(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	for _, s := range []struct{ batch, seq, heads, width int }{{1, 1, 1, 2}, {2, 5, 3, 12}, {3, 7, 2, 6}, {2, 4, 4, 20}} {
		d := s.width / s.heads
		qkv, dy := make([]float32, s.batch*s.seq*3*s.width), make([]float32, s.batch*s.seq*s.width)
		for i := range qkv {
			qkv[i] = float32(r.NormFloat64())
		}
		for i := range dy {
			dy[i] = float32(r.NormFloat64())
		}
		nP := s.batch * s.heads * s.seq * s.seq
		f := &fakeAttn{base: 1 << 20}
		qp, gp := f.alloc(qkv), f.alloc(dy)
		yp, pp := f.alloc(make([]float32, len(dy))), f.alloc(make([]float32, nP))
		dqp, dsp := f.alloc(make([]float32, len(qkv))), f.alloc(make([]float32, nP))
		sc := attentionScale(d)
		if err := attentionForward(f, yp, pp, qp, s.batch, s.seq, s.heads, s.width, sc); err != nil {
			t.Fatal(err)
		}
		if err := attentionBackward(f, dqp, gp, qp, pp, dsp, s.batch, s.seq, s.heads, s.width, sc); err != nil {
			t.Fatal(err)
		}
		c := cpu.New()
		load := func(v []float32) kernels.Buffer {
			b, err := c.Alloc(len(v))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Upload(b, v); err != nil {
				t.Fatal(err)
			}
			return b
		}
		cq, cg := load(qkv), load(dy)
		cy, cp, cdq := load(make([]float32, len(dy))), load(make([]float32, nP)), load(make([]float32, len(qkv)))
		if err := c.Attention(cy, cp, cq, s.batch, s.seq, s.heads, s.width); err != nil {
			t.Fatal(err)
		}
		if err := c.AttentionGrad(cdq, cg, cq, cp, s.batch, s.seq, s.heads, s.width); err != nil {
			t.Fatal(err)
		}
		for _, o := range []struct {
			name string
			got  devPtr
			want kernels.Buffer
			n    int
		}{{"y", yp, cy, len(dy)}, {"probs", pp, cp, nP}, {"dqkv", dqp, cdq, len(qkv)}} {
			want := make([]float32, o.n)
			if err := c.Download(want, o.want); err != nil {
				t.Fatal(err)
			}
			got := f.mem[f.idx(o.got):][:o.n]
			for i := range want {
				if diff := math.Abs(float64(got[i] - want[i])); !(diff <= 1e-5*(1+math.Abs(float64(want[i])))) {
					t.Fatalf("%+v: %s[%d] = %g, the CPU backend's %g", s, o.name, i, got[i], want[i])
				}
			}
		}
		for _, g := range []int{f.idx(qp) + len(qkv), f.idx(gp) + len(dy), f.idx(yp) + len(dy), f.idx(pp) + nP, f.idx(dqp) + len(qkv)} {
			if !math.IsNaN(float64(f.mem[g])) {
				t.Fatalf("%+v: a product wrote past a buffer's end (guard at %d is %g)", s, g, f.mem[g])
			}
		}
	}
}
