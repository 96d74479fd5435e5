package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dml-project/dml/trainer/data"
)

// Shape is one sample's shape (data.Shape): C channels of H×W.
type Shape = data.Shape

// Layer kinds (LayerSpec.Kind).
const (
	KindLinear  = "linear"  // y = x Wᵀ + b, W [out, in] (nn.Linear)
	KindConv    = "conv"    // 2-D convolution, W [out, in, k, k] (nn.Conv2d), zero padding
	KindReLU    = "relu"    // max(x, 0)
	KindMaxPool = "maxpool" // k×k windows at stride (default k), no padding
	KindAvgPool = "avgpool" // likewise, the mean; kernel 0: global (the whole plane)
	KindFlatten = "flatten" // C×H×W → C·H·W (no data moves)
)

// LayerKinds lists the kinds a network may use.
var LayerKinds = []string{KindLinear, KindConv, KindReLU, KindMaxPool, KindAvgPool, KindFlatten}

// LayerSpec is one layer of a network, as a preset or a model file
// describes it.
type LayerSpec struct {
	Kind string `json:"kind" yaml:"kind"`
	// Name prefixes the layer's parameters in .npz files and checkpoints
	// ("conv1" → conv1.weight, conv1.bias): PyTorch's state_dict names.
	Name   string `json:"name,omitempty" yaml:"name"`
	Out    int    `json:"out,omitempty" yaml:"out"`       // linear: outputs; conv: output channels
	Kernel int    `json:"kernel,omitempty" yaml:"kernel"` // conv, pooling: the window's side
	Stride int    `json:"stride,omitempty" yaml:"stride"` // conv: default 1; pooling: default the kernel
	Pad    int    `json:"pad,omitempty" yaml:"pad"`       // conv: zero padding on every side
	NoBias bool   `json:"no_bias,omitempty" yaml:"no_bias"`
}

// hasParams reports whether the layer has weights.
func (l LayerSpec) hasParams() bool { return l.Kind == KindLinear || l.Kind == KindConv }

// node is a layer placed in a network: its input and output shapes, and
// for a layer with parameters, its index in Arch.Layers.
type node struct {
	LayerSpec
	in, out Shape
	param   int // -1: none
}

// label names a layer for an error: "layer 3 (conv2)".
func (l LayerSpec) label(i int) string {
	if l.Name != "" {
		return fmt.Sprintf("layer %d (%s %s)", i, l.Kind, l.Name)
	}
	return fmt.Sprintf("layer %d (%s)", i, l.Kind)
}

// NewNet builds the architecture of a network: its input shape, its
// layers, the classes its last layer must output, and the loss. Every
// layer's shapes are checked before anything is allocated; an error names
// the layer and what did not fit.
func NewNet(input Shape, layers []LayerSpec, classes int, loss Loss) (Arch, error) {
	if input.C <= 0 || input.H <= 0 || input.W <= 0 {
		return Arch{}, fmt.Errorf("input shape %v: every dimension must be positive", input)
	}
	in := input
	a := Arch{Sizes: []int{input.Size(), classes}, Loss: loss, Input: &in, Net: layers}
	nodes, err := a.nodes()
	if err != nil {
		return Arch{}, err
	}
	last := nodes[len(nodes)-1]
	if !last.out.Flat() || last.out.C != classes {
		return Arch{}, fmt.Errorf("the network ends in %v values per sample, the data has %d classes: its last layer must be a linear (or a global pool) of %d outputs", last.out, classes, classes)
	}
	if loss == SigmoidCE && classes != 1 {
		return Arch{}, fmt.Errorf("logistic loss needs 1 output, got %d", classes)
	}
	return a, nil
}

// nodes places the layers: for an MLP (no Net), linear layers named
// layerK with ReLU between them; for a network, its layers in order, each
// checked against the shape it receives.
func (a Arch) nodes() ([]node, error) {
	if len(a.Net) == 0 {
		var ns []node
		for k := 0; k+1 < len(a.Sizes); k++ {
			ns = append(ns, node{LayerSpec: LayerSpec{Kind: KindLinear, Name: fmt.Sprintf("layer%d", k), Out: a.Sizes[k+1]},
				in: Shape{C: a.Sizes[k], H: 1, W: 1}, out: Shape{C: a.Sizes[k+1], H: 1, W: 1}, param: k})
			if k+2 < len(a.Sizes) {
				ns = append(ns, node{LayerSpec: LayerSpec{Kind: KindReLU}, in: ns[len(ns)-1].out, out: ns[len(ns)-1].out, param: -1})
			}
		}
		return ns, nil
	}
	if a.Input == nil {
		return nil, fmt.Errorf("a network needs its input shape")
	}
	shape := *a.Input
	var ns []node
	params, names := 0, map[string]int{}
	total := 0
	for i, l := range a.Net {
		n := node{LayerSpec: l, in: shape, param: -1}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%s: %s", l.label(i), fmt.Sprintf(format, args...))
		}
		switch l.Kind {
		case KindLinear:
			if !shape.Flat() {
				return nil, bad("needs a flat input, but it gets %v values per sample: put a flatten before it", shape)
			}
			if l.Out <= 0 {
				return nil, bad("out %d must be positive", l.Out)
			}
			if l.Kernel != 0 || l.Stride != 0 || l.Pad != 0 {
				return nil, bad("kernel, stride and pad are for conv and pooling layers")
			}
			n.out = Shape{C: l.Out, H: 1, W: 1}
		case KindConv:
			if l.Out <= 0 || l.Kernel <= 0 {
				return nil, bad("out %d and kernel %d must be positive", l.Out, l.Kernel)
			}
			n.Stride = max(l.Stride, 1)
			if l.Stride < 0 || l.Pad < 0 || l.Pad >= l.Kernel {
				return nil, bad("stride %d and pad %d: want stride ≥ 1 and 0 ≤ pad < kernel %d", l.Stride, l.Pad, l.Kernel)
			}
			oh, ow := convOut(shape.H, shape.W, l.Kernel, n.Stride, l.Pad)
			if oh == 0 {
				return nil, bad("a %d×%d kernel is larger than its %d×%d input padded by %d", l.Kernel, l.Kernel, shape.H, shape.W, l.Pad)
			}
			n.out = Shape{C: l.Out, H: oh, W: ow}
		case KindMaxPool, KindAvgPool:
			k := l.Kernel
			if k == 0 && l.Kind == KindAvgPool {
				if shape.H != shape.W {
					return nil, bad("a global pool needs a square input, it gets %v", shape)
				}
				k = shape.H
			}
			n.Kernel = k
			n.Stride = l.Stride
			if n.Stride == 0 {
				n.Stride = k
			}
			if k <= 0 || n.Stride <= 0 || l.Pad != 0 {
				return nil, bad("kernel %d, stride %d, pad %d: want a positive kernel and stride, no padding", l.Kernel, l.Stride, l.Pad)
			}
			oh, ow := convOut(shape.H, shape.W, k, n.Stride, 0)
			if oh == 0 {
				return nil, bad("a %d×%d window is larger than its %d×%d input", k, k, shape.H, shape.W)
			}
			n.out = Shape{C: shape.C, H: oh, W: ow}
		case KindReLU:
			n.out = shape
		case KindFlatten:
			n.out = Shape{C: shape.Size(), H: 1, W: 1}
		default:
			return nil, bad("unknown kind %q (want %s)", l.Kind, strings.Join(LayerKinds, ", "))
		}
		if l.hasParams() {
			if l.Name == "" {
				return nil, bad("needs a name: its parameters are saved as NAME.weight and NAME.bias")
			}
			if j, dup := names[l.Name]; dup {
				return nil, bad("name %q is also layer %d's", l.Name, j)
			}
			names[l.Name] = i
			fan, out := n.fanIn(), n.Out
			size := fan*out + out
			if fan > MaxParams/out || total > MaxParams-size {
				return nil, fmt.Errorf("%s: the network has more than %d parameters: %w", l.label(i), MaxParams, ErrTooLarge)
			}
			total += size
			n.param = params
			params++
		}
		if n.out.Size() <= 0 || n.out.Size() > MaxParams {
			return nil, bad("output of %v values per sample", n.out)
		}
		ns = append(ns, n)
		shape = n.out
	}
	if params == 0 {
		return nil, fmt.Errorf("the network has no layer with parameters (linear or conv)")
	}
	return ns, nil
}

// fanIn is the inputs each output of a layer with parameters sums over:
// PyTorch's fan_in (in features, or in channels × k × k).
func (n node) fanIn() int {
	if n.Kind == KindConv {
		return n.in.C * n.Kernel * n.Kernel
	}
	return n.in.Size()
}

// convOut is kernels.ConvOut (model does not import kernels for it: the
// shapes are checked here, before any backend is involved).
func convOut(h, w, k, stride, pad int) (int, int) {
	if k <= 0 || stride <= 0 || pad < 0 || h+2*pad < k || w+2*pad < k {
		return 0, 0
	}
	return (h+2*pad-k)/stride + 1, (w+2*pad-k)/stride + 1
}

// mustNodes is nodes for an Arch already checked (NewArch, NewNet, a
// checkpoint's, checked when read).
func (a Arch) mustNodes() []node {
	ns, err := a.nodes()
	if err != nil {
		panic(fmt.Sprintf("model: an unchecked architecture: %v", err))
	}
	return ns
}

// Check validates an architecture read from outside (a checkpoint's
// metadata): its network places, or its sizes are positive.
func (a Arch) Check() error {
	if len(a.Net) == 0 {
		if len(a.Sizes) < 2 {
			return fmt.Errorf("architecture %v: want at least inputs and outputs", a.Sizes)
		}
		_, err := NewArch(a.Sizes[0], a.Sizes[1:len(a.Sizes)-1], a.Sizes[len(a.Sizes)-1], a.Loss)
		return err
	}
	if a.Input == nil || len(a.Sizes) != 2 {
		return fmt.Errorf("a network's architecture needs its input shape and [inputs, classes] sizes")
	}
	b, err := NewNet(*a.Input, a.Net, a.Sizes[1], a.Loss)
	if err == nil && b.Sizes[0] != a.Sizes[0] {
		err = fmt.Errorf("the input shape %v holds %d values, the sizes say %d", *a.Input, a.Input.Size(), a.Sizes[0])
	}
	return err
}

// ActivationFloats is what a Model holds per sample of its batch for the
// layers' outputs and their gradients (a ReLU's and a flatten's share
// their input's).
func (a Arch) ActivationFloats() int {
	n := 0
	for i, nd := range a.mustNodes() {
		if i == 0 || (nd.Kind != KindReLU && nd.Kind != KindFlatten) {
			n += 2 * nd.out.Size()
		}
	}
	return n
}

// ScratchFloats is what a Model holds besides: one sample's convolution
// columns and the ones its bias products use.
func (a Arch) ScratchFloats() int {
	cols, ones := 0, 0
	for _, nd := range a.mustNodes() {
		if nd.Kind == KindConv {
			cols = max(cols, nd.fanIn()*nd.out.H*nd.out.W)
			ones = max(ones, nd.out.H*nd.out.W)
		}
	}
	return cols + ones
}

// KeptColumns is the convolution columns a Model of rows rows keeps from
// its forward pass for the backward pass (0 when they would exceed
// keepColsFloats and are recomputed instead).
func (a Arch) KeptColumns(rows int) int {
	keep := 0
	for _, nd := range a.mustNodes() {
		if nd.Kind == KindConv {
			keep += nd.fanIn() * nd.out.H * nd.out.W * rows
		}
	}
	if keep > keepColsFloats {
		return 0
	}
	return keep
}

// Equal reports whether a and b are the same architecture.
func (a Arch) Equal(b Arch) bool {
	if !slices.Equal(a.Sizes, b.Sizes) || a.Loss != b.Loss || len(a.Net) != len(b.Net) || (a.Input == nil) != (b.Input == nil) {
		return false
	}
	if a.Input != nil && *a.Input != *b.Input {
		return false
	}
	return slices.Equal(a.Net, b.Net)
}

// Describe is the architecture in one line: the MLP's sizes
// ([784 256 10]), or a network's input and layers ("1×28×28: conv1 6k5p2,
// relu, maxpool 2, …, fc3 10").
func (a Arch) Describe() string {
	if len(a.Net) == 0 {
		return fmt.Sprint(a.Sizes)
	}
	parts := []string{}
	for _, n := range a.mustNodes() {
		s := n.Kind
		switch n.Kind {
		case KindLinear:
			s = fmt.Sprintf("%s %d", n.Name, n.Out)
		case KindConv:
			s = fmt.Sprintf("%s %dk%d", n.Name, n.Out, n.Kernel)
			if n.Stride != 1 {
				s += fmt.Sprintf("s%d", n.Stride)
			}
			if n.Pad != 0 {
				s += fmt.Sprintf("p%d", n.Pad)
			}
		case KindMaxPool, KindAvgPool:
			s = fmt.Sprintf("%s %d", n.Kind, n.Kernel)
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("%v: %s", *a.Input, strings.Join(parts, ", "))
}
