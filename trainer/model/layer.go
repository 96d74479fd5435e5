package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/dml-project/dml/kernels"
)

// A layerKind is one kind of layer: all that the model knows of it, in
// the kind's own file (layer_*.go). The placer (net.go) asks it for its
// output shape and parameters, Arch for its parameter layout, initial
// values, buffers, FLOPs and one-line description, and the Model
// (model.go) for its ops and its forward and backward passes. Adding a
// kind is its file (with the one line that registers it) and its ops on
// the backends if it needs new ones.
type layerKind interface {
	// place checks node n's settings against its input shape n.in,
	// fills in the defaults it takes (a stride, a pool's window), and
	// sets n.out. Its error says what did not fit; the caller names the
	// layer.
	place(n *node) error
	// weight is the shape of the layer's weight (PyTorch's layout) and
	// its fan-in, the inputs each output sums over; nil for a kind
	// without parameters. A bias of n.Out values follows the weight
	// unless n.NoBias.
	weight(n node) (shape []int, fanIn int)
	// init fills the layer's parameters p (its weight, then its bias) as
	// PyTorch's module does, drawing from rng in order.
	init(l Layer, p []float32, rng *rand.Rand)
	// buffers are the values the layer keeps besides its parameters and
	// saves with them (PyTorch's module buffers: batch norm's running
	// statistics), in the order of the state vector.
	buffers(n node) []buffer
	// inPlace reports whether node i works in its input's buffers (its
	// output and output gradient are its input's), given which earlier
	// nodes do; it is asked only where node i is its input's only
	// reader and that input is not the batch.
	inPlace(ns []node, i int, in []bool) bool
	// setup finds the ops the model's nodes of this kind need on its
	// backend (an error naming what is missing) and allocates their
	// buffers, once per model, after the nodes' outputs.
	setup(m *Model, a *allocator) error
	// forward writes node i's output y from its input x for the batch
	// loaded (m.rows rows).
	forward(m *Model, i int, n node, x, y kernels.Buffer) error
	// backward takes node i's output gradient dy, writes its parameters'
	// gradient (then tells hook, m.hooked) and hands its input its part
	// of the input gradient (m.give).
	backward(m *Model, i int, n node, x, dy kernels.Buffer, hook GradHook) error
	// scratch is the floats per sample of the batch the layer keeps in
	// its own buffers (setup) besides its output and output gradient:
	// the memory check's share of it (Arch.ScratchFloats).
	scratch(n node) int
	// flops is the floating-point operations of the layer's forward
	// matrix product per sample (0 for a layer without one): TrainFLOPs
	// counts it thrice (twice for the first layer).
	flops(n node) int64
	// describe is the layer in Arch.Describe's line ("conv1 6k5p2").
	describe(n node) string
}

// sequential marks a kind that takes a sequence of positions (an input
// Shape with T > 0): each position's values as a row of its own (linear,
// layer norm) or elementwise (GELU, dropout, the residual add), or the
// sequence as a whole (attention, the embeddings). Others are refused a
// sequence by the placer.
type sequential interface{ sequence() }

// A binder is a kind whose node refers to an earlier one (tiedlinear to
// its embedding): bind finds it among the nodes placed before n (and
// takes what it needs from it) before place.
type binder interface {
	bind(n *node, earlier []node) error
}

// An aliaser is a kind whose weight is another layer's: alias is the
// tensor its weight is saved as besides (Arch.Aliases), a view of the
// other layer's parameters in ls.
type aliaser interface {
	alias(n node, ns []node, ls []Layer) Tensor
}

// A composite is a kind that places as several layers (a residual
// block): it is never a node itself.
type composite interface {
	expand(p *placer, i int, l LayerSpec, from int, shape Shape) (int, Shape, error)
}

// buffer is one of a layer's buffers: its name after the layer's
// ("running_mean"), shape ([] for a scalar) and initial value.
type buffer struct {
	name  string
	shape []int
	init  float32
}

// kinds is every kind a network may use, by name, and kindAdd, a
// residual block's sum, which the block alone places. Each kind's file
// registers it (register, in an init function): adding a kind touches
// that file alone, and its ops if it needs new ones.
var kinds = map[string]any{} // a layerKind or a composite

// kindAdd is a block's sum of its two paths (a node, not a LayerSpec:
// layer_add.go).
const kindAdd = "add"

// register adds a kind (a layerKind or a composite) under name.
func register(name string, kind any) {
	_, leaf := kind.(layerKind)
	_, comp := kind.(composite)
	if !leaf && !comp || kinds[name] != nil {
		panic("model: register " + name + ": not a kind, or a second one of that name")
	}
	kinds[name] = kind
}

// LayerKinds lists the kinds a network may use, sorted.
func LayerKinds() []string {
	var names []string
	for name := range kinds {
		if name != kindAdd {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// needOps returns the optional op set of m's backend that of finds, or
// an error "model …: need, which backend … lacks" (need says which layers
// need what) wrapping kernels.ErrNoConv.
func needOps[T any](m *Model, of func(kernels.Backend) (T, bool), need string) (T, error) {
	ops, ok := of(m.B)
	if !ok {
		return ops, fmt.Errorf("model %s: %s, which backend %s lacks: %w", m.Arch.Describe(), need, m.B.Name(), kernels.ErrNoConv)
	}
	return ops, nil
}

// kind is node n's kind (n is placed: its kind is a layerKind).
func (n node) kind() layerKind { return kinds[n.Kind].(layerKind) }

// fanIn is the inputs each output of a layer with parameters sums over:
// PyTorch's fan_in (in features, or in channels × k × k).
func (n node) fanIn() int {
	_, f := n.kind().weight(n)
	return f
}

// base is what a kind without parameters, buffers, ops of its own or a
// matrix product has; kinds embed it and override what they have (place,
// forward and backward each kind writes).
type base struct{}

func (base) weight(node) ([]int, int) { return nil, 0 }

// init is nn.Linear's and nn.Conv2d's default (kaiming_uniform with a =
// √5): weights and biases uniform in ±1/√fan_in.
func (base) init(l Layer, p []float32, rng *rand.Rand) {
	bound := 1 / math.Sqrt(float64(l.In))
	for i := range p {
		p[i] = float32((2*rng.Float64() - 1) * bound)
	}
}

func (base) buffers(node) []buffer            { return nil }
func (base) inPlace([]node, int, []bool) bool { return false }
func (base) setup(*Model, *allocator) error   { return nil }
func (base) flops(node) int64                 { return 0 }
func (base) scratch(node) int                 { return 0 }
func (base) describe(n node) string           { return n.Kind }
