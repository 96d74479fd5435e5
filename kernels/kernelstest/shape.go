package kernelstest

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/optim"
)

// guard hands out buffers and host slices full of a recognisable pattern
// and afterwards checks that none of them changed: an op that rejects its
// shapes must not have written anything.
type guard struct {
	be    kernels.Backend
	bufs  []kernels.Buffer
	hosts [][]float32
	zeros []kernels.Buffer // label buffers, all zero
}

// pattern is what a watched buffer or slice of n elements holds.
func (g *guard) pattern(n int) []float32 { return ramp(n, 1000) }

// buf returns a buffer of n elements the guard watches.
func (g *guard) buf(n int) kernels.Buffer {
	b, err := g.be.Alloc(n)
	if err != nil {
		panic(err) // testAlloc reports it
	}
	if err := g.be.Upload(b, g.pattern(n)); err != nil {
		panic(err) // lengths match by construction
	}
	g.bufs = append(g.bufs, b)
	return b
}

// labels returns a buffer of n valid labels (zeros) the guard watches, so
// that only the shape is wrong.
func (g *guard) labels(n int) kernels.Buffer {
	b, err := g.be.Alloc(n)
	if err != nil {
		panic(err) // testAlloc reports it
	}
	g.zeros = append(g.zeros, b)
	return b
}

// host returns a host slice of n elements the guard watches.
func (g *guard) host(n int) []float32 {
	h := g.pattern(n)
	g.hosts = append(g.hosts, h)
	return h
}

// check reports any watched buffer or slice that changed.
func (g *guard) check(t *testing.T, name string) {
	t.Helper()
	for i, b := range g.bufs {
		checkBits(t, name+": buffer "+strconv.Itoa(i), read(t, g.be, b), g.pattern(b.Len()))
	}
	for i, h := range g.hosts {
		checkBits(t, name+": host slice "+strconv.Itoa(i), h, g.pattern(len(h)))
	}
	for i, b := range g.zeros {
		checkBits(t, name+": labels "+strconv.Itoa(i), read(t, g.be, b), make([]float32, b.Len()))
	}
}

// shapeCases are calls with arguments that do not fit: each must return an
// error wrapping kernels.ErrShape and write nothing.
var shapeCases = []struct {
	name string
	call func(g *guard) error
}{
	{"Upload short src", func(g *guard) error { return g.be.Upload(g.buf(3), g.host(2)) }},
	{"Upload long src", func(g *guard) error { return g.be.Upload(g.buf(3), g.host(4)) }},
	{"Download", func(g *guard) error { return g.be.Download(g.host(4), g.buf(3)) }},
	{"Copy", func(g *guard) error { return g.be.Copy(g.buf(3), g.buf(4)) }},

	{"Gemm a", func(g *guard) error { return g.be.Gemm(false, false, 2, 3, 4, 1, g.buf(7), g.buf(12), 0, g.buf(6)) }},
	{"Gemm b", func(g *guard) error { return g.be.Gemm(false, false, 2, 3, 4, 1, g.buf(8), g.buf(11), 1, g.buf(6)) }},
	{"Gemm c", func(g *guard) error { return g.be.Gemm(false, false, 2, 3, 4, 1, g.buf(8), g.buf(12), 0, g.buf(5)) }},
	{"Gemm transA", func(g *guard) error { return g.be.Gemm(true, false, 2, 3, 4, 1, g.buf(6), g.buf(12), 0, g.buf(6)) }},
	{"Gemm transB", func(g *guard) error { return g.be.Gemm(false, true, 2, 3, 4, 1, g.buf(8), g.buf(6), 0, g.buf(6)) }},
	{"Gemm negative m", func(g *guard) error { return g.be.Gemm(false, false, -1, 0, 0, 1, g.buf(0), g.buf(0), 0, g.buf(0)) }},
	{"Gemm k=0 with a and b not empty", func(g *guard) error { return g.be.Gemm(false, false, 2, 3, 0, 1, g.buf(2), g.buf(3), 0, g.buf(6)) }},
	{"Gemm m·n overflows", func(g *guard) error {
		// 2³²·2³² wraps to 0 in 64-bit ints: all three lengths "match".
		big := 1 << (strconv.IntSize / 2)
		return g.be.Gemm(false, false, big, big, 0, 1, g.buf(0), g.buf(0), 0, g.buf(0))
	}},

	{"AddBias x", func(g *guard) error { return g.be.AddBias(g.buf(5), g.buf(3), 2, 3) }},
	{"AddBias bias", func(g *guard) error { return g.be.AddBias(g.buf(6), g.buf(2), 2, 3) }},
	{"AddBias negative rows", func(g *guard) error { return g.be.AddBias(g.buf(0), g.buf(3), -1, 3) }},
	{"SumRows dst", func(g *guard) error { return g.be.SumRows(g.buf(2), g.buf(6), 2, 3, 0) }},
	{"SumRows negative cols", func(g *guard) error { return g.be.SumRows(g.buf(0), g.buf(0), 2, -1, 0) }},
	{"SumRows x", func(g *guard) error { return g.be.SumRows(g.buf(3), g.buf(7), 2, 3, 1) }},

	{"Relu", func(g *guard) error { return g.be.Relu(g.buf(3), g.buf(4)) }},
	{"ReluGrad dx", func(g *guard) error { return g.be.ReluGrad(g.buf(3), g.buf(4), g.buf(4)) }},
	{"ReluGrad dy", func(g *guard) error { return g.be.ReluGrad(g.buf(4), g.buf(3), g.buf(4)) }},

	{"SoftmaxCrossEntropy grad", func(g *guard) error {
		return g.be.SoftmaxCrossEntropy(g.buf(5), g.buf(6), g.labels(2), 2, 3, 1, g.buf(2))
	}},
	{"SoftmaxCrossEntropy logits", func(g *guard) error {
		return g.be.SoftmaxCrossEntropy(g.buf(7), g.buf(7), g.labels(2), 2, 3, 1, g.buf(2))
	}},
	{"SoftmaxCrossEntropy labels", func(g *guard) error {
		return g.be.SoftmaxCrossEntropy(g.buf(6), g.buf(6), g.labels(3), 2, 3, 1, g.buf(2))
	}},
	{"SoftmaxCrossEntropy short stats", func(g *guard) error {
		return g.be.SoftmaxCrossEntropy(g.buf(6), g.buf(6), g.labels(2), 2, 3, 1, g.buf(1))
	}},
	{"SoftmaxCrossEntropy long stats", func(g *guard) error {
		return g.be.SoftmaxCrossEntropy(g.buf(6), g.buf(6), g.labels(2), 2, 3, 1, g.buf(3))
	}},
	{"SoftmaxCrossEntropy no columns", func(g *guard) error {
		return g.be.SoftmaxCrossEntropy(g.buf(0), g.buf(0), g.labels(2), 2, 0, 1, g.buf(2))
	}},
	{"SoftmaxCrossEntropy negative rows", func(g *guard) error {
		return g.be.SoftmaxCrossEntropy(g.buf(0), g.buf(0), g.labels(0), -1, 3, 1, g.buf(2))
	}},
	{"SigmoidCrossEntropy grad", func(g *guard) error {
		return g.be.SigmoidCrossEntropy(g.buf(2), g.buf(3), g.labels(3), 3, 1, g.buf(2))
	}},
	{"SigmoidCrossEntropy logits", func(g *guard) error {
		return g.be.SigmoidCrossEntropy(g.buf(3), g.buf(3), g.labels(3), 4, 1, g.buf(2))
	}},
	{"SigmoidCrossEntropy labels", func(g *guard) error {
		return g.be.SigmoidCrossEntropy(g.buf(3), g.buf(3), g.labels(2), 3, 1, g.buf(2))
	}},
	{"SigmoidCrossEntropy stats", func(g *guard) error {
		return g.be.SigmoidCrossEntropy(g.buf(3), g.buf(3), g.labels(3), 3, 1, g.buf(1))
	}},
	{"Predict out", func(g *guard) error { return g.be.Predict(g.buf(3), g.buf(6), 2, 3) }},
	{"Predict x", func(g *guard) error { return g.be.Predict(g.buf(2), g.buf(5), 2, 3) }},
	{"Predict no columns", func(g *guard) error { return g.be.Predict(g.buf(2), g.buf(0), 2, 0) }},

	{"Axpy", func(g *guard) error { return g.be.Axpy(2, g.buf(4), g.buf(3)) }},
	{"Sum last src", func(g *guard) error { return g.be.Sum(g.buf(3), g.buf(3), g.buf(3), g.buf(2)) }},
	{"Dot", func(g *guard) error { _, err := g.be.Dot(g.buf(3), g.buf(4)); return err }},

	{"SGD", func(g *guard) error { return g.be.Optimize(g.buf(3), g.buf(4), nil, sgdUpdate) }},
	{"Momentum g", func(g *guard) error { return g.be.Optimize(g.buf(3), g.buf(2), g.buf(3), momentumUpdate) }},
	{"Momentum v", func(g *guard) error { return g.be.Optimize(g.buf(3), g.buf(3), g.buf(4), momentumUpdate) }},
	{"Adagrad g", func(g *guard) error { return g.be.Optimize(g.buf(3), g.buf(4), g.buf(3), adagradUpdate) }},
	{"Adagrad h", func(g *guard) error { return g.be.Optimize(g.buf(3), g.buf(3), g.buf(2), adagradUpdate) }},
	{"Adam g", func(g *guard) error { return g.be.Optimize(g.buf(3), g.buf(2), g.buf(6), adamUpdate) }},
	{"Adam s", func(g *guard) error { return g.be.Optimize(g.buf(3), g.buf(3), g.buf(3), adamUpdate) }},
	{"LARS g", func(g *guard) error { return g.be.Optimize(g.buf(3), g.buf(2), g.buf(3), larsUpdate) }},
	{"LARS v", func(g *guard) error { return g.be.Optimize(g.buf(3), g.buf(3), g.buf(4), larsUpdate) }},
	{"no such rule", func(g *guard) error {
		return g.be.Optimize(g.buf(3), g.buf(3), g.buf(3), optim.Update{Kind: optim.Kind(len(optim.Kinds))})
	}},
}

// An update of each rule for the shape and foreign-buffer checks.
var (
	sgdUpdate      = optim.NewUpdate(optim.Config{Kind: optim.SGD, LR: 0.1})
	momentumUpdate = optim.NewUpdate(optim.Config{Kind: optim.Momentum, LR: 0.1, Momentum: 0.9})
	adagradUpdate  = optim.NewUpdate(optim.Config{Kind: optim.Adagrad, LR: 0.1, Eps: 1e-6})
	adamUpdate     = optim.NewUpdate(optim.Config{Kind: optim.Adam, LR: 0.1, Eps: 1e-8, Beta1: 0.9, Beta2: 0.999, Step: 1})
	larsUpdate     = optim.NewUpdate(optim.Config{Kind: optim.LARS, LR: 0.1, Momentum: 0.9, TrustCoef: 0.001})
)

// testErrShape runs every shape case: the error must wrap kernels.ErrShape
// and every buffer and host slice involved must be as it was.
func testErrShape(t *testing.T, be kernels.Backend) {
	for _, c := range shapeCases {
		g := &guard{be: be}
		err := catch(func() error { return c.call(g) })
		switch {
		case err == nil:
			t.Errorf("%s: no error, want one wrapping kernels.ErrShape", c.name)
		case !isShape(err):
			t.Errorf("%s: error %q does not wrap kernels.ErrShape", c.name, err)
		}
		g.check(t, c.name)
	}
}

// isShape reports whether err wraps kernels.ErrShape.
func isShape(err error) bool { return errors.Is(err, kernels.ErrShape) }

// catch runs f and turns a panic into an error that wraps nothing.
func catch(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return f()
}
