package model

import (
	"fmt"
	"slices"
	"strings"
)

// NewNet builds the architecture of a network: its input shape, its
// layers, the classes its last layer must output, and the loss. Every
// layer's shapes are checked before anything is allocated; an error names
// the layer and what did not fit.
func NewNet(input Shape, layers []LayerSpec, classes int, loss Loss) (Arch, error) {
	if input.C <= 0 || input.H <= 0 || input.W <= 0 {
		return Arch{}, fmt.Errorf("input shape %v: every dimension must be positive", input)
	}
	if (loss == TokenCE) != (input.T > 0) {
		return Arch{}, fmt.Errorf("input shape %v: a token sequence is trained with next-token loss, and only a token sequence", input)
	}
	if input.T > 0 { // tokens are ids: only an embedding reads them
		switch {
		case len(layers) == 0 || layers[0].Kind != KindEmbedding:
			return Arch{}, fmt.Errorf("a token sequence's network starts with an embedding (tokens are ids, not values): its layer 0 is %s", describeSpec(layers))
		case layers[0].Rows < classes:
			return Arch{}, fmt.Errorf("layer 0 (embedding %s) has rows %d, fewer than the %d token ids of the data: rows must be at least %d", layers[0].Name, layers[0].Rows, classes, classes)
		}
	}
	in := input
	a := Arch{Sizes: []int{input.RowValues(), classes}, Loss: loss, Input: &in, Net: layers}
	nodes, err := a.nodes()
	if err != nil {
		return Arch{}, err
	}
	last := nodes[len(nodes)-1]
	if loss == TokenCE {
		if !last.out.Flat() || last.out.C != classes || last.out.T != input.T {
			return Arch{}, fmt.Errorf("the network ends in %v values per sample, the data has %d positions of %d tokens: its last layer must be a linear of %d outputs per position", last.out, input.T, classes, classes)
		}
	} else if !last.out.Flat() || last.out.C != classes || last.out.T > 0 {
		return Arch{}, fmt.Errorf("the network ends in %v values per sample, the data has %d classes: its last layer must be a linear (or a global pool) of %d outputs", last.out, classes, classes)
	}
	if loss == SigmoidCE && classes != 1 {
		return Arch{}, fmt.Errorf("logistic loss needs 1 output, got %d", classes)
	}
	return a, nil
}

// nodes places the layers: for an MLP (no Net), linear layers named
// layerK with ReLU between them; for a network, its layers in order (a
// block as its layers), each checked against the shape it receives.
func (a Arch) nodes() ([]node, error) {
	if len(a.Net) == 0 {
		var ns []node
		for k := 0; k+1 < len(a.Sizes); k++ {
			ns = append(ns, node{LayerSpec: LayerSpec{Kind: KindLinear, Name: fmt.Sprintf("layer%d", k), Out: a.Sizes[k+1]},
				in: Shape{C: a.Sizes[k], H: 1, W: 1}, out: Shape{C: a.Sizes[k+1], H: 1, W: 1}, param: k, from: len(ns) - 1})
			if k+2 < len(a.Sizes) {
				ns = append(ns, node{LayerSpec: LayerSpec{Kind: KindReLU}, in: ns[len(ns)-1].out, out: ns[len(ns)-1].out, param: -1, from: len(ns) - 1})
			}
		}
		return ns, nil
	}
	if a.Input == nil {
		return nil, fmt.Errorf("a network needs its input shape")
	}
	p := &placer{names: map[string]int{}}
	from, shape := -1, *a.Input
	for i, l := range a.Net {
		var err error
		if c, ok := kinds[l.Kind].(composite); ok {
			from, shape, err = c.expand(p, i, l, from, shape)
		} else {
			from, shape, err = p.place(i, l, from, shape)
		}
		if err != nil {
			return nil, err
		}
	}
	if p.nparams == 0 {
		return nil, fmt.Errorf("the network has no layer with parameters (linear or conv)")
	}
	return p.ns, nil
}

// placer lays nodes out one after another.
type placer struct {
	ns      []node
	names   map[string]int // parameter prefix → the Net layer that has it
	nparams int            // layers with parameters so far
	total   int            // parameters so far
	state   int            // state values so far
}

// place adds layer l (layer i of the Net) reading node from's output of
// the given shape, and returns the new node and its output's shape.
func (p *placer) place(i int, l LayerSpec, from int, shape Shape) (int, Shape, error) {
	n := node{LayerSpec: l, in: shape, param: -1, from: from}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s", l.label(i), fmt.Sprintf(format, args...))
	}
	k, ok := kinds[l.Kind].(layerKind)
	if !ok || l.Kind == kindAdd {
		return 0, shape, bad("unknown kind %q (want %s)", l.Kind, strings.Join(LayerKinds(), ", "))
	}
	if _, seq := k.(sequential); shape.T > 0 && !seq {
		return 0, shape, bad("takes images or vectors, but it gets a sequence of %d positions (%v)", shape.T, shape)
	}
	if b, ok := k.(binder); ok {
		if err := b.bind(&n, p.ns); err != nil {
			return 0, shape, bad("%v", err)
		}
	}
	if err := k.place(&n); err != nil {
		return 0, shape, bad("%v", err)
	}
	if w, fan := k.weight(n); w != nil {
		if err := p.params(i, &n, fan); err != nil {
			return 0, shape, err
		}
	}
	n.state = p.state
	for _, b := range k.buffers(n) {
		p.state += Tensor{Shape: b.shape}.Len()
	}
	if n.out.Size() <= 0 || n.out.Size() > MaxParams {
		return 0, shape, bad("output of %v values per sample", n.out)
	}
	p.ns = append(p.ns, n)
	return len(p.ns) - 1, n.out, nil
}

// params checks the name of node n, a layer with parameters (layer i
// of the Net) of fan-in fan, and its size, and numbers it.
func (p *placer) params(i int, n *node, fan int) error {
	l := n.LayerSpec
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s", l.label(i), fmt.Sprintf(format, args...))
	}
	if l.Name == "" {
		return bad("needs a name: its parameters are saved as NAME.weight and NAME.bias")
	}
	if why := badName(l.Name); why != "" {
		return bad("name %.40q…: %s", l.Name, why)
	}
	if j, dup := p.names[l.Name]; dup {
		return bad("name %q is also layer %d's", l.Name, j)
	}
	p.names[l.Name] = i
	out := n.Out
	size := fan*out + out
	if fan > MaxParams/out || p.total > MaxParams-size {
		return fmt.Errorf("%s: the network has more than %d parameters: %w", l.label(i), MaxParams, ErrTooLarge)
	}
	p.total += size
	n.param = p.nparams
	p.nparams++
	return nil
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

// inPlace reports, for each node, whether it works in its input's buffers
// (never the batch's), where its input has no other reader: a ReLU (its
// backward needs only its output), a flatten (it moves nothing), and a
// residual add, which sums its second input into its first one's output
// and so takes that output's gradient as its own — where the first input
// owns its buffers and its backward does not read its output (not a
// ReLU): ResNet's add onto its block's last batch norm.
func inPlace(ns []node) []bool {
	readers := make([]int, len(ns))
	for _, n := range ns {
		if n.from >= 0 {
			readers[n.from]++
		}
		if n.Kind == kindAdd && n.plus >= 0 {
			readers[n.plus]++
		}
	}
	in := make([]bool, len(ns))
	for i, n := range ns {
		if n.from < 0 || readers[n.from] != 1 {
			continue
		}
		in[i] = n.kind().inPlace(ns, i, in)
	}
	return in
}

// ActivationFloats is what a Model holds per sample of its batch for the
// layers' outputs and their gradients (a ReLU's and a flatten's share
// their input's, inPlace), batch norm's statistics aside (ScratchFloats).
func (a Arch) ActivationFloats() int {
	ns := a.mustNodes()
	n := 0
	for i, in := range inPlace(ns) {
		if !in {
			n += 2 * ns[i].out.Size()
		}
	}
	if a.hasForks() {
		n += a.largestOutput() // the scratch a second gradient is summed from
	}
	return n
}

// hasForks reports whether some node's output is read twice (a block).
func (a Arch) hasForks() bool {
	for _, n := range a.mustNodes() {
		if n.Kind == kindAdd {
			return true
		}
	}
	return false
}

func (a Arch) largestOutput() int {
	m := 0
	for _, n := range a.mustNodes() {
		m = max(m, n.out.Size())
	}
	return m
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

// NumState is the length of a network's state vector: every layer's
// buffers (layerKind.buffers; batch norm's running mean and variance, C
// each, and its count of batches, num_batches_tracked).
func (a Arch) NumState() int {
	n := 0
	for _, t := range a.StateTensors() {
		n += t.Len()
	}
	return n
}

// StateTensors names and places the state vector's arrays (PyTorch's
// buffers: NAME.running_mean, NAME.running_var, NAME.num_batches_tracked,
// the last a 0-d array).
func (a Arch) StateTensors() []Tensor {
	var ts []Tensor
	for _, nd := range a.mustNodes() {
		off := nd.state
		for _, b := range nd.kind().buffers(nd) {
			t := Tensor{nd.Name + "." + b.name, b.shape, off}
			ts = append(ts, t)
			off += t.Len()
		}
	}
	return ts
}

// InitState is the state a network starts with: each buffer's initial
// value (nn.BatchNorm2d's: running means 0, variances 1, no batches).
func (a Arch) InitState() []float32 {
	s := make([]float32, a.NumState())
	for _, nd := range a.mustNodes() {
		off := nd.state
		for _, b := range nd.kind().buffers(nd) {
			n := Tensor{Shape: b.shape}.Len()
			for i := range n {
				s[off+i] = b.init
			}
			off += n
		}
	}
	return s
}

// TrainFLOPs is the floating-point operations of one training step's
// matrix products per sample, as GEMMs (a convolution as im2col: out ×
// in·k·k × output pixels): the forward product (layerKind.flops) and the
// weight gradient of every layer with one, and the input gradient of
// every one but the first. Bias, activations, pooling, batch norm and the
// optimizer are not counted (as bench/ddp/compare.sh counts).
func (a Arch) TrainFLOPs() int64 {
	var f int64
	for _, n := range a.mustNodes() {
		prod := n.kind().flops(n)
		f += 2 * prod
		if n.from >= 0 && prod > 0 { // the input gradient (not of the batch)
			f += prod
		}
	}
	return f
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
		parts = append(parts, n.kind().describe(n))
	}
	if len(parts) > 16 { // ResNets: the ends, and how many
		parts = append(append(parts[:5:5], fmt.Sprintf("… (%d layers) …", len(parts)-8)), parts[len(parts)-3:]...)
	}
	return fmt.Sprintf("%v: %s", *a.Input, strings.Join(parts, ", "))
}

// describeSpec names a network's first layer for a message.
func describeSpec(layers []LayerSpec) string {
	if len(layers) == 0 {
		return "missing"
	}
	if layers[0].Name != "" {
		return fmt.Sprintf("%v %s", layers[0].Kind, layers[0].Name)
	}
	return fmt.Sprint(layers[0].Kind)
}
