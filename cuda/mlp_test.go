//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/optim"
)

// mlp is a ReLU MLP built from Backend ops alone, for the GPU-vs-CPU
// training check and the step benchmark. Weights are in PyTorch's layout
// (layer l: W [out, in] then b [out]) in one fused parameter buffer; the
// gradients and the momentum buffers are fused the same way (the gradient
// buffer is what the trainer AllReduces), with views per parameter.
type mlp struct {
	be     kernels.Backend
	sizes  []int
	batch  int
	params kernels.Buffer
	grads  kernels.Buffer
	vel    kernels.Buffer
	w, b   []kernels.Buffer // views of params
	gw, gb []kernels.Buffer // views of grads
	acts   []kernels.Buffer // acts[0] = x; acts[l+1] = layer l's output (in place: z, then relu(z))
	dz     []kernels.Buffer // dz[l]: gradient w.r.t. layer l's pre-activation (the last is acts[L])
	labels kernels.Buffer
	// hook, if set, is called in the backward pass once layer l's weight
	// and bias gradients are queued (last layer first).
	hook  func(l int) error
	stats kernels.Buffer
}

// paramCount is the length of the fused parameter vector.
func paramCount(sizes []int) int {
	n := 0
	for l := 0; l+1 < len(sizes); l++ {
		n += sizes[l+1]*sizes[l] + sizes[l+1]
	}
	return n
}

// initParams draws He-initialised weights and small biases, seeded.
func initParams(sizes []int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	p := make([]float32, 0, paramCount(sizes))
	for l := 0; l+1 < len(sizes); l++ {
		in, out := sizes[l], sizes[l+1]
		s := math.Sqrt(2 / float64(in))
		for range out * in {
			p = append(p, float32(r.NormFloat64()*s))
		}
		for range out {
			p = append(p, float32(r.NormFloat64()*0.01))
		}
	}
	return p
}

func newMLP(be kernels.Backend, sizes []int, batch int, params []float32) (*mlp, error) {
	m := &mlp{be: be, sizes: sizes, batch: batch}
	var err error
	alloc := func(n int) kernels.Buffer {
		if err != nil {
			return nil
		}
		var b kernels.Buffer
		b, err = be.Alloc(n)
		return b
	}
	np := paramCount(sizes)
	m.params, m.grads, m.vel = alloc(np), alloc(np), alloc(np)
	L := len(sizes) - 1
	m.acts = make([]kernels.Buffer, L+1)
	m.dz = make([]kernels.Buffer, L)
	for l := range m.acts {
		m.acts[l] = alloc(batch * sizes[l])
	}
	for l := 0; l+1 < L; l++ {
		m.dz[l] = alloc(batch * sizes[l+1])
	}
	m.labels, m.stats = alloc(batch), alloc(2)
	if err != nil {
		return nil, err
	}
	m.dz[L-1] = m.acts[L]
	off := 0
	for l := range L {
		in, out := sizes[l], sizes[l+1]
		m.w = append(m.w, be.View(m.params, off, out*in))
		m.gw = append(m.gw, be.View(m.grads, off, out*in))
		off += out * in
		m.b = append(m.b, be.View(m.params, off, out))
		m.gb = append(m.gb, be.View(m.grads, off, out))
		off += out
	}
	return m, be.Upload(m.params, params)
}

// forwardBackward runs the network on acts[0] and labels, leaving the
// gradient of the mean loss in grads and (loss sum, correct) in stats.
func (m *mlp) forwardBackward() error {
	be, B, L := m.be, m.batch, len(m.sizes)-1
	for l := range L {
		in, out := m.sizes[l], m.sizes[l+1]
		if err := be.Gemm(false, true, B, out, in, 1, m.acts[l], m.w[l], 0, m.acts[l+1]); err != nil {
			return err
		}
		if err := be.AddBias(m.acts[l+1], m.b[l], B, out); err != nil {
			return err
		}
		if l < L-1 {
			if err := be.Relu(m.acts[l+1], m.acts[l+1]); err != nil {
				return err
			}
		}
	}
	if err := be.SoftmaxCrossEntropy(m.acts[L], m.acts[L], m.labels, B, m.sizes[L], 1/float32(B), m.stats); err != nil {
		return err
	}
	for l := L - 1; l >= 0; l-- {
		in, out := m.sizes[l], m.sizes[l+1]
		if err := be.Gemm(true, false, out, in, B, 1, m.dz[l], m.acts[l], 0, m.gw[l]); err != nil {
			return err
		}
		if err := be.SumRows(m.gb[l], m.dz[l], B, out, 0); err != nil {
			return err
		}
		if m.hook != nil {
			if err := m.hook(l); err != nil {
				return err
			}
		}
		if l > 0 {
			if err := be.Gemm(false, false, B, in, out, 1, m.dz[l], m.w[l], 0, m.dz[l-1]); err != nil {
				return err
			}
			if err := be.ReluGrad(m.dz[l-1], m.dz[l-1], m.acts[l]); err != nil {
				return err
			}
		}
	}
	return nil
}

// step uploads a batch, runs forward and backward, and applies momentum
// SGD to the whole fused parameter vector at once.
func (m *mlp) step(x, labels []float32, lr, mu float32) error {
	if err := m.be.Upload(m.acts[0], x); err != nil {
		return fmt.Errorf("upload x: %w", err)
	}
	if err := m.be.Upload(m.labels, labels); err != nil {
		return fmt.Errorf("upload labels: %w", err)
	}
	if err := m.forwardBackward(); err != nil {
		return err
	}
	return m.be.Optimize(m.params, m.grads, m.vel, optim.NewUpdate(optim.Config{Kind: optim.Momentum, LR: lr, Momentum: mu}))
}

// teacherData draws n samples of dim inputs, labelled by a fixed random
// linear teacher (argmax over classes), so the MLP has something to learn.
func teacherData(seed uint64, n, dim, classes int) (x, labels []float32) {
	r := rand.New(rand.NewPCG(seed, 2))
	t := make([]float64, dim*classes)
	for i := range t {
		t[i] = r.NormFloat64()
	}
	x = make([]float32, n*dim)
	labels = make([]float32, n)
	for i := range n {
		row := x[i*dim : (i+1)*dim]
		for j := range row {
			row[j] = float32(r.NormFloat64())
		}
		best, top := 0, math.Inf(-1)
		for c := range classes {
			s := 0.0
			for j, v := range row {
				s += float64(v) * t[j*classes+c]
			}
			if s > top {
				best, top = c, s
			}
		}
		labels[i] = float32(best)
	}
	return x, labels
}
