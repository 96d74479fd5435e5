package cpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas/gonum"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
)

// gemmBench is one Gemm shape: op(A) m×k, op(B) k×n.
type gemmBench struct {
	m, n, k        int
	transA, transB bool
	naive          bool // also time the naive loop (too slow for the largest)
}

// gemmBenches are square sizes, then the MLP 784→256→128→10 at batch 64 with
// weights stored in×out: per layer the forward Y = X·W (NN), the weight
// gradient dW = Xᵀ·dY (TN) and the input gradient dX = dY·Wᵀ (NT).
var gemmBenches = func() []gemmBench {
	var bs []gemmBench
	for _, s := range []int{64, 128, 256, 512} {
		bs = append(bs, gemmBench{m: s, n: s, k: s, naive: true})
	}
	bs = append(bs, gemmBench{m: 1024, n: 1024, k: 1024})
	const batch = 64
	for _, l := range [][2]int{{784, 256}, {256, 128}, {128, 10}} {
		in, out := l[0], l[1]
		bs = append(bs,
			gemmBench{m: batch, n: out, k: in, naive: true},
			gemmBench{m: in, n: out, k: batch, transA: true, naive: true},
			gemmBench{m: batch, n: in, k: out, transB: true, naive: true},
		)
	}
	return bs
}()

func transName(transA, transB bool) string {
	name := []byte("NN")
	if transA {
		name[0] = 'T'
	}
	if transB {
		name[1] = 'T'
	}
	return string(name)
}

// BenchmarkGemm times C = op(A)·op(B) (alpha 1, beta 0) on the cpu backend
// and on a naive triple loop, reporting GFLOP/s (2·m·n·k per call) beside
// the bytes of A, B and C per call.
func BenchmarkGemm(b *testing.B) {
	for _, g := range gemmBenches {
		name := fmt.Sprintf("m=%d,n=%d,k=%d/trans=%s", g.m, g.n, g.k, transName(g.transA, g.transB))
		r := rand.New(rand.NewPCG(1, 2))
		a, bm := randFloats(r, g.m*g.k), randFloats(r, g.k*g.n)
		c := make([]float32, g.m*g.n)
		impls := []struct {
			name string
			run  func() error
		}{{"cpu", nil}}
		be := cpu.New()
		ab, bb, cb := upload(be, a), upload(be, bm), mustAlloc(be, g.m*g.n)
		impls[0].run = func() error { return be.Gemm(g.transA, g.transB, g.m, g.n, g.k, 1, ab, bb, 0, cb) }
		if g.naive {
			impls = append(impls, struct {
				name string
				run  func() error
			}{"naive", func() error { naiveGemm(g.transA, g.transB, g.m, g.n, g.k, a, bm, c); return nil }})
		}
		for _, impl := range impls {
			b.Run(name+"/impl="+impl.name, func(b *testing.B) {
				b.SetBytes(int64(4 * (g.m*g.k + g.k*g.n + g.m*g.n)))
				for b.Loop() {
					if err := impl.run(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(2*float64(g.m)*float64(g.n)*float64(g.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// naiveGemm is C = op(A)·op(B) as the textbook loop, in i-l-j order so the
// inner loop runs along rows of C (and of B when it is not transposed).
func naiveGemm(transA, transB bool, m, n, k int, a, b, c []float32) {
	clear(c)
	for i := range m {
		row := c[i*n : (i+1)*n]
		for l := range k {
			av := a[i*k+l]
			if transA {
				av = a[l*m+i]
			}
			if transB {
				for j := range row {
					row[j] += av * b[j*k+l]
				}
				continue
			}
			brow := b[l*n : (l+1)*n]
			for j := range row {
				row[j] += av * brow[j]
			}
		}
	}
}

// vectorLengths is the ladder for the memory-bound ops: L1, L2, last-level
// cache and main memory sizes.
var vectorLengths = []int{1 << 10, 1 << 14, 1 << 18, 1 << 22}

// BenchmarkSum times dst = Σ srcs over 2 and 4 sources, against a baseline
// of copy plus gonum's assembly Saxpy; bytes are the sources read and dst
// written.
func BenchmarkSum(b *testing.B) {
	for _, srcs := range []int{2, 4} {
		for _, n := range vectorLengths {
			be := cpu.New()
			r := rand.New(rand.NewPCG(3, 4))
			bufs := make([]kernels.Buffer, srcs)
			hosts := make([][]float32, srcs)
			for i := range bufs {
				hosts[i] = randFloats(r, n)
				bufs[i] = upload(be, hosts[i])
			}
			dst := mustAlloc(be, n)
			dstHost := make([]float32, n)
			name := fmt.Sprintf("srcs=%d/n=%d", srcs, n)
			b.Run(name+"/impl=cpu", func(b *testing.B) {
				b.SetBytes(int64(4 * n * (srcs + 1)))
				for b.Loop() {
					if err := be.Sum(dst, bufs...); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(name+"/impl=gonum-saxpy", func(b *testing.B) {
				b.SetBytes(int64(4 * n * (srcs + 1)))
				impl := gonum.Implementation{}
				for b.Loop() {
					copy(dstHost, hosts[0])
					for _, h := range hosts[1:] {
						impl.Saxpy(n, 1, h, 1, dstHost, 1)
					}
				}
			})
		}
	}
}

// BenchmarkAxpy times y += alpha·x against gonum's assembly Saxpy; bytes
// are x and y read and y written.
func BenchmarkAxpy(b *testing.B) {
	for _, n := range vectorLengths {
		be := cpu.New()
		r := rand.New(rand.NewPCG(5, 6))
		xh, yh := randFloats(r, n), randFloats(r, n)
		x, y := upload(be, xh), upload(be, yh)
		b.Run(fmt.Sprintf("n=%d/impl=cpu", n), func(b *testing.B) {
			b.SetBytes(int64(4 * 3 * n))
			for b.Loop() {
				if err := be.Axpy(1e-3, x, y); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("n=%d/impl=gonum-saxpy", n), func(b *testing.B) {
			b.SetBytes(int64(4 * 3 * n))
			impl := gonum.Implementation{}
			for b.Loop() {
				impl.Saxpy(n, 1e-3, xh, 1, yh, 1)
			}
		})
	}
}

func randFloats(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func mustAlloc(be kernels.Backend, n int) kernels.Buffer {
	buf, err := be.Alloc(n)
	if err != nil {
		panic(err)
	}
	return buf
}

func upload(be kernels.Backend, host []float32) kernels.Buffer {
	buf := mustAlloc(be, len(host))
	if err := be.Upload(buf, host); err != nil {
		panic(err)
	}
	return buf
}

// BenchmarkLayerNorm times layer norm's forward and gradient at the gpt
// model's shape (batch 16 × 128 tokens, 128 wide); bytes are x and y (and
// dy) per call.
func BenchmarkLayerNorm(b *testing.B) {
	const rows, cols = 2048, 128
	be := cpu.New()
	r := rand.New(rand.NewPCG(5, 6))
	x, dy := upload(be, randFloats(r, rows*cols)), upload(be, randFloats(r, rows*cols))
	g, bias := upload(be, randFloats(r, cols)), upload(be, randFloats(r, cols))
	y, dx := mustAlloc(be, rows*cols), mustAlloc(be, rows*cols)
	mean, inv := mustAlloc(be, rows), mustAlloc(be, rows)
	dg, db := mustAlloc(be, cols), mustAlloc(be, cols)
	b.Run("forward", func(b *testing.B) {
		b.SetBytes(8 * rows * cols)
		for b.Loop() {
			if err := be.LayerNorm(y, mean, inv, x, g, bias, rows, cols, 1e-5); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("grad", func(b *testing.B) {
		b.SetBytes(12 * rows * cols)
		for b.Loop() {
			if err := be.LayerNormGrad(dx, dg, db, dy, x, mean, inv, g, rows, cols); err != nil {
				b.Fatal(err)
			}
		}
	})
}
