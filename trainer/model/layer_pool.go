package model

import (
	"fmt"

	"github.com/dml-project/dml/kernels"
)

// Pooling kinds: k×k windows at stride (default k), no padding, the
// maximum or the mean; an average pool of kernel 0 is global (the whole
// plane).
const (
	KindMaxPool = "maxpool"
	KindAvgPool = "avgpool"
)

func init() {
	register(KindMaxPool, pool{max: true})
	register(KindAvgPool, pool{})
}

// pool is max pooling (nn.MaxPool2d) or average pooling (nn.AvgPool2d):
// k×k windows at a stride (default k); a max pool may have padding (at
// most k/2, PyTorch's −∞: kernels.PadPoolOps), an average pool none, and
// one of kernel 0 is global (the whole plane, which must be square). Its
// ops are the backend's kernels.ConvOps, or its kernels.LibPoolOps where
// a library pools (oneDNN: on data in its blocked layouts, which the
// convolution, batch norm and ReLU before leave, so that none is
// reordered to plain and back around the pool).
type pool struct {
	base
	max bool
}

func (p pool) place(n *node) error {
	k := n.Kernel
	if k == 0 && !p.max {
		if n.in.H != n.in.W {
			return fmt.Errorf("a global pool needs a square input, it gets %v", n.in)
		}
		k = n.in.H
	}
	asked := n.LayerSpec
	n.Kernel = k
	if n.Stride == 0 {
		n.Stride = k
	}
	switch {
	case k <= 0 || n.Stride <= 0 || n.Pad < 0:
		return fmt.Errorf("kernel %d, stride %d, pad %d: want a positive kernel and stride", asked.Kernel, asked.Stride, asked.Pad)
	case n.Pad != 0 && !p.max:
		return fmt.Errorf("pad %d: an average pool takes no padding", n.Pad)
	case 2*n.Pad > k:
		return fmt.Errorf("pad %d: at most half the %d×%d window (PyTorch's rule)", n.Pad, k, k)
	}
	oh, ow := convOut(n.in.H, n.in.W, k, n.Stride, n.Pad)
	if oh == 0 {
		return fmt.Errorf("a %d×%d window is larger than its %d×%d input", k, k, n.in.H, n.in.W)
	}
	n.out = Shape{C: n.in.C, H: oh, W: ow}
	return nil
}

func (p pool) setup(m *Model, a *allocator) error {
	kind := KindAvgPool
	if p.max {
		kind = KindMaxPool
	}
	if err := m.findConvOps(kind); err != nil {
		return err
	}
	if lp, ok := kernels.LibPoolOf(m.B); ok {
		m.libPool = lp
		return nil
	}
	for _, n := range m.nodes {
		if n.Kind == kind && n.Pad > 0 && m.padPool == nil {
			var err error
			if m.padPool, err = needOps(m, kernels.PadPoolOf, "a padded max pool needs kernels.PadPoolOps"); err != nil {
				return err
			}
		}
	}
	return nil
}

func (pool) describe(n node) string {
	if n.Pad > 0 {
		return fmt.Sprintf("%s %ds%dp%d", n.Kind, n.Kernel, n.Stride, n.Pad)
	}
	return fmt.Sprintf("%s %d", n.Kind, n.Kernel)
}

func (p pool) forward(m *Model, i int, n node, x, y kernels.Buffer) error {
	if m.libPool != nil {
		return m.libPool.Pool(y, x, p.max, m.rows, n.in.C, n.in.H, n.in.W, n.Kernel, n.Stride, n.Pad)
	}
	if n.Pad > 0 {
		return m.padPool.MaxPoolPad(y, x, m.rows*n.in.C, n.in.H, n.in.W, n.Kernel, n.Stride, n.Pad)
	}
	if p.max {
		return m.conv.MaxPool(y, x, m.rows*n.in.C, n.in.H, n.in.W, n.Kernel, n.Stride)
	}
	return m.conv.AvgPool(y, x, m.rows*n.in.C, n.in.H, n.in.W, n.Kernel, n.Stride)
}

func (p pool) backward(m *Model, i int, n node, x, dy kernels.Buffer, hook GradHook) error {
	return m.give(n.from, func(dst kernels.Buffer) error {
		if m.libPool != nil {
			return m.libPool.PoolGrad(dst, dy, x, p.max, m.rows, n.in.C, n.in.H, n.in.W, n.Kernel, n.Stride, n.Pad)
		}
		if n.Pad > 0 {
			return m.padPool.MaxPoolPadGrad(dst, dy, x, m.rows*n.in.C, n.in.H, n.in.W, n.Kernel, n.Stride, n.Pad)
		}
		if p.max {
			return m.conv.MaxPoolGrad(dst, dy, x, m.rows*n.in.C, n.in.H, n.in.W, n.Kernel, n.Stride)
		}
		return m.conv.AvgPoolGrad(dst, dy, m.rows*n.in.C, n.in.H, n.in.W, n.Kernel, n.Stride)
	})
}
