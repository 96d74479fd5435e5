package model

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/dml-project/dml/kernels"
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
	// KindBatchNorm is BatchNorm2d (per channel; eps 1e-5, momentum 0.1):
	// the batch's statistics in training, the running ones in evaluation.
	KindBatchNorm = "batchnorm"
	// KindBlock is He et al.'s basic residual block (Out channels, Stride):
	// NAME.conv1 3×3 (stride), NAME.bn1, ReLU, NAME.conv2 3×3, NAME.bn2,
	// plus the shortcut — the input itself, or, where the shape changes,
	// NAME.shortcut.0 (1×1 conv, stride) and NAME.shortcut.1 (batch norm)
	// — then ReLU. Its convolutions have no bias.
	KindBlock = "block"
	// kindAdd is a block's sum of its two paths (a node, not a LayerSpec).
	kindAdd = "add"
)

// LayerKinds lists the kinds a network may use.
var LayerKinds = []string{KindLinear, KindConv, KindReLU, KindMaxPool, KindAvgPool, KindFlatten, KindBatchNorm, KindBlock}

// BatchNorm's constants (PyTorch's defaults).
const (
	BatchNormEps      = 1e-5
	BatchNormMomentum = 0.1
)

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
func (l LayerSpec) hasParams() bool {
	return l.Kind == KindLinear || l.Kind == KindConv || l.Kind == KindBatchNorm
}

// node is a layer placed in a network: its input and output shapes, and
// for a layer with parameters, its index in Arch.Layers. A node reads the
// output of node from (-1: the batch) and, for a block's sum, adds node
// plus's.
type node struct {
	LayerSpec
	in, out Shape
	param   int // -1: none
	from    int
	plus    int // kindAdd only
	state   int // batchnorm: its offset in the state vector
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
		if l.Kind == KindBlock {
			from, shape, err = p.block(i, l, from, shape)
		} else {
			from, shape, err = p.place(i, l, from, shape)
		}
		if err != nil {
			return nil, err
		}
	}
	if p.params == 0 {
		return nil, fmt.Errorf("the network has no layer with parameters (linear or conv)")
	}
	return p.ns, nil
}

// placer lays nodes out one after another.
type placer struct {
	ns     []node
	names  map[string]int // parameter prefix → the Net layer that has it
	params int
	total  int // parameters so far
	state  int // state values so far
}

// place adds layer l (layer i of the Net) reading node from's output of
// the given shape, and returns the new node and its output's shape.
func (p *placer) place(i int, l LayerSpec, from int, shape Shape) (int, Shape, error) {
	n := node{LayerSpec: l, in: shape, param: -1, from: from}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s", l.label(i), fmt.Sprintf(format, args...))
	}
	switch l.Kind {
	case KindLinear:
		if !shape.Flat() {
			return 0, shape, bad("needs a flat input, but it gets %v values per sample: put a flatten before it", shape)
		}
		if l.Out <= 0 {
			return 0, shape, bad("out %d must be positive", l.Out)
		}
		if l.Kernel != 0 || l.Stride != 0 || l.Pad != 0 {
			return 0, shape, bad("kernel, stride and pad are for conv and pooling layers")
		}
		n.out = Shape{C: l.Out, H: 1, W: 1}
	case KindConv:
		if l.Out <= 0 || l.Kernel <= 0 {
			return 0, shape, bad("out %d and kernel %d must be positive", l.Out, l.Kernel)
		}
		n.Stride = max(l.Stride, 1)
		if l.Stride < 0 || l.Pad < 0 || l.Pad >= l.Kernel {
			return 0, shape, bad("stride %d and pad %d: want stride ≥ 1 and 0 ≤ pad < kernel %d", l.Stride, l.Pad, l.Kernel)
		}
		oh, ow := convOut(shape.H, shape.W, l.Kernel, n.Stride, l.Pad)
		if oh == 0 {
			return 0, shape, bad("a %d×%d kernel is larger than its %d×%d input padded by %d", l.Kernel, l.Kernel, shape.H, shape.W, l.Pad)
		}
		n.out = Shape{C: l.Out, H: oh, W: ow}
	case KindMaxPool, KindAvgPool:
		k := l.Kernel
		if k == 0 && l.Kind == KindAvgPool {
			if shape.H != shape.W {
				return 0, shape, bad("a global pool needs a square input, it gets %v", shape)
			}
			k = shape.H
		}
		n.Kernel = k
		n.Stride = l.Stride
		if n.Stride == 0 {
			n.Stride = k
		}
		if k <= 0 || n.Stride <= 0 || l.Pad != 0 {
			return 0, shape, bad("kernel %d, stride %d, pad %d: want a positive kernel and stride, no padding", l.Kernel, l.Stride, l.Pad)
		}
		oh, ow := convOut(shape.H, shape.W, k, n.Stride, 0)
		if oh == 0 {
			return 0, shape, bad("a %d×%d window is larger than its %d×%d input", k, k, shape.H, shape.W)
		}
		n.out = Shape{C: shape.C, H: oh, W: ow}
	case KindBatchNorm:
		if l.Out != 0 && l.Out != shape.C || l.Kernel != 0 || l.Stride != 0 || l.Pad != 0 || l.NoBias {
			return 0, shape, bad("takes no settings but its name (out %d: its input has %d channels)", l.Out, shape.C)
		}
		if from < 0 {
			return 0, shape, bad("a batch norm cannot read the data itself (its backward pass would need the data's gradient): put a conv or linear layer before it")
		}
		n.Out = shape.C
		n.out = shape
		n.state = p.state
		p.state += 2*shape.C + 1
	case KindReLU:
		n.out = shape
	case KindFlatten:
		n.out = Shape{C: shape.Size(), H: 1, W: 1}
	default:
		return 0, shape, bad("unknown kind %q (want %s)", l.Kind, strings.Join(LayerKinds, ", "))
	}
	if l.hasParams() {
		if l.Name == "" {
			return 0, shape, bad("needs a name: its parameters are saved as NAME.weight and NAME.bias")
		}
		if why := badName(l.Name); why != "" {
			return 0, shape, bad("name %.40q…: %s", l.Name, why)
		}
		if j, dup := p.names[l.Name]; dup {
			return 0, shape, bad("name %q is also layer %d's", l.Name, j)
		}
		p.names[l.Name] = i
		fan, out := n.fanIn(), n.Out
		size := fan*out + out
		if fan > MaxParams/out || p.total > MaxParams-size {
			return 0, shape, fmt.Errorf("%s: the network has more than %d parameters: %w", l.label(i), MaxParams, ErrTooLarge)
		}
		p.total += size
		n.param = p.params
		p.params++
	}
	if n.out.Size() <= 0 || n.out.Size() > MaxParams {
		return 0, shape, bad("output of %v values per sample", n.out)
	}
	p.ns = append(p.ns, n)
	return len(p.ns) - 1, n.out, nil
}

// MaxLayerName bounds a layer's name: its arrays' names in .npz files and
// checkpoints are NAME.weight.npy and the like, zip entry names.
const MaxLayerName = 200

// badName says what makes name a poor array name (too long; a '/', a
// '\\', "..", a control character or a space, which would make a path
// inside the .npz or an entry PyTorch cannot name), or "".
func badName(name string) string {
	switch {
	case len(name) > MaxLayerName:
		return fmt.Sprintf("%d bytes long, more than %d", len(name), MaxLayerName)
	case strings.ContainsAny(name, "/\\") || strings.Contains(name, ".."):
		return "contains '/', '\\' or '..'"
	case strings.IndexFunc(name, func(r rune) bool { return r < 0x21 || r == 0x7f }) >= 0 || !utf8.ValidString(name):
		return "contains a space, a control character or invalid UTF-8"
	case strings.HasPrefix(name, ".") || strings.HasSuffix(name, "."):
		return "starts or ends with '.'"
	}
	return ""
}

// block places a basic residual block (KindBlock) as its layers.
func (p *placer) block(i int, l LayerSpec, from int, shape Shape) (int, Shape, error) {
	if l.Name == "" || l.Out <= 0 || l.Stride < 0 || l.Kernel != 0 || l.Pad != 0 {
		return 0, shape, fmt.Errorf("%s: a block needs a name and out channels (and optionally a stride), nothing else", l.label(i))
	}
	stride := max(l.Stride, 1)
	sub := func(kind, name string, out, k, s, pad int) LayerSpec {
		return LayerSpec{Kind: kind, Name: l.Name + "." + name, Out: out, Kernel: k, Stride: s, Pad: pad, NoBias: kind == KindConv}
	}
	x := from
	at, sh, err := p.place(i, sub(KindConv, "conv1", l.Out, 3, stride, 1), x, shape)
	for _, s := range []LayerSpec{sub(KindBatchNorm, "bn1", 0, 0, 0, 0), {Kind: KindReLU}, sub(KindConv, "conv2", l.Out, 3, 1, 1), sub(KindBatchNorm, "bn2", 0, 0, 0, 0)} {
		if err != nil {
			return 0, shape, err
		}
		at, sh, err = p.place(i, s, at, sh)
	}
	if err != nil {
		return 0, shape, err
	}
	short := x
	if stride != 1 || shape.C != l.Out {
		s, ssh, err := p.place(i, sub(KindConv, "shortcut.0", l.Out, 1, stride, 0), x, shape)
		if err == nil {
			s, ssh, err = p.place(i, sub(KindBatchNorm, "shortcut.1", 0, 0, 0, 0), s, ssh)
		}
		if err != nil {
			return 0, shape, err
		}
		if ssh != sh {
			return 0, shape, fmt.Errorf("%s: the shortcut gives %v, the block's path %v", l.label(i), ssh, sh)
		}
		short = s
	}
	p.ns = append(p.ns, node{LayerSpec: LayerSpec{Kind: kindAdd}, in: sh, out: sh, param: -1, from: at, plus: short})
	return p.place(i, LayerSpec{Kind: KindReLU}, len(p.ns)-1, sh)
}

// fanIn is the inputs each output of a layer with parameters sums over:
// PyTorch's fan_in (in features, or in channels × k × k).
func (n node) fanIn() int {
	switch n.Kind {
	case KindConv:
		return n.in.C * n.Kernel * n.Kernel
	case KindBatchNorm:
		return 1 // a weight and a bias per channel
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
		switch n.Kind {
		case KindReLU, KindFlatten:
			in[i] = true
		case kindAdd:
			in[i] = !in[n.from] && ns[n.from].Kind != KindReLU
		}
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

// NumState is the length of a network's state vector: for each batch
// norm, its running mean and variance (C each) and its count of batches
// (num_batches_tracked).
func (a Arch) NumState() int {
	n := 0
	for _, nd := range a.mustNodes() {
		if nd.Kind == KindBatchNorm {
			n += 2*nd.Out + 1
		}
	}
	return n
}

// StateTensors names and places the state vector's arrays (PyTorch's
// buffers: NAME.running_mean, NAME.running_var, NAME.num_batches_tracked,
// the last a 0-d array).
func (a Arch) StateTensors() []Tensor {
	var ts []Tensor
	for _, nd := range a.mustNodes() {
		if nd.Kind == KindBatchNorm {
			c := nd.Out
			ts = append(ts, Tensor{nd.Name + ".running_mean", []int{c}, nd.state},
				Tensor{nd.Name + ".running_var", []int{c}, nd.state + c},
				Tensor{nd.Name + ".num_batches_tracked", []int{}, nd.state + 2*c})
		}
	}
	return ts
}

// InitState is the state a network starts with: running means 0,
// variances 1, no batches (nn.BatchNorm2d's).
func (a Arch) InitState() []float32 {
	s := make([]float32, a.NumState())
	for _, nd := range a.mustNodes() {
		if nd.Kind == KindBatchNorm {
			for i := range nd.Out {
				s[nd.state+nd.Out+i] = 1
			}
		}
	}
	return s
}

// ScratchFloats is what a Model of rows rows holds besides: the columns
// of one chunk of samples of a convolution (when they are not kept), its
// output in the GEMM's layout (out × chunk·oh·ow, for Transpose01), and
// the ones its bias products use.
func (a Arch) ScratchFloats(rows int) int {
	cols, out, ones := a.convScratch(rows, convChunkFloats)
	if a.KeptColumns(rows) > 0 {
		cols = 0
	}
	return cols + out + ones
}

// convScratch is, over the conv layers at rows rows per batch in chunks
// of at most limit floats of columns, the largest chunk's columns, the
// largest chunk's output and the largest chunk's output plane (the ones a
// bias is added with).
func (a Arch) convScratch(rows, limit int) (cols, out, ones int) {
	for _, nd := range a.mustNodes() {
		if nd.Kind == KindConv {
			k := nd.chunk(rows, limit)
			cols = max(cols, nd.columns()*k)
			out = max(out, nd.out.Size()*k)
			ones = max(ones, nd.out.H*nd.out.W*k)
		}
	}
	return cols, out, ones
}

// flipped reports whether conv node n's input gradient runs as a
// convolution of dY (Model.convBackward): stride 1, as many outputs as
// inputs and an output as large as the input, so dY's columns and the
// input gradient fit the buffers of x's columns and of dY.
func (n node) flipped() bool {
	return n.Kind == KindConv && n.Stride == 1 && n.Out == n.in.C && n.out.H == n.in.H && n.out.W == n.in.W
}

// columns is one sample's Im2col columns of a conv node: c·k·k × oh·ow.
func (n node) columns() int { return n.fanIn() * n.out.H * n.out.W }

// convChunkFloats bounds the columns of the samples a convolution runs as
// one GEMM (c·k·k × chunk·oh·ow): a batch runs in chunks of that many
// samples, each one Im2col, one GEMM and one Transpose01 (and three GEMMs
// backward), rather than a GEMM per sample. 1 MiB (the columns still in
// cache when the GEMM reads them) measured best of 64 KiB … 64 MiB on the
// blas backend (BenchmarkResNet20Step, one core: 126–133 samples/s at 1
// MiB, 103–106 at 16 MiB, 92 per sample; LeNet-5 7,100–7,300 against
// 4,400–4,900 and 5,600).
// On a device (a backend with kernels.HostAllocator) every kernel is a
// launch, and a chunk is deviceChunkFloats (128 MiB: ResNet-20 at batch
// 128 in one chunk per layer).
const (
	convChunkFloats   = 256 << 10
	deviceChunkFloats = 32 << 20
)

// chunkFloats is the chunk bound for backend b (or the one a decorator
// such as trace.Backend wraps).
func chunkFloats(b kernels.Backend) int {
	if _, device := kernels.Innermost(b).(kernels.HostAllocator); device {
		return deviceChunkFloats
	}
	return convChunkFloats
}

// chunk is how many samples of a batch of rows conv node n runs as one
// GEMM: as many as fit limit floats of columns, at least 1.
func (n node) chunk(rows, limit int) int { return max(1, min(rows, limit/n.columns())) }

// KeptColumns is the convolution columns a Model of rows rows keeps from
// its forward pass for the backward pass (0 when they would exceed
// keepColsFloats and are recomputed instead).
func (a Arch) KeptColumns(rows int) int {
	keep := 0
	for _, nd := range a.mustNodes() {
		if nd.Kind == KindConv {
			keep += nd.columns() * rows
		}
	}
	if keep > keepColsFloats {
		return 0
	}
	return keep
}

// TrainFLOPs is the floating-point operations of one training step's
// matrix products per sample, as GEMMs (a convolution as im2col: out ×
// in·k·k × output pixels): the forward product and the weight gradient of
// every layer with weights, and the input gradient of every one but the
// first. Bias, activations, pooling, batch norm and the optimizer are not
// counted (as bench/ddp/compare.sh counts).
func (a Arch) TrainFLOPs() int64 {
	var f int64
	for _, n := range a.mustNodes() {
		var prod int64
		switch n.Kind {
		case KindLinear:
			prod = 2 * int64(n.Out) * int64(n.in.Size())
		case KindConv:
			prod = 2 * int64(n.Out) * int64(n.fanIn()) * int64(n.out.H*n.out.W)
		default:
			continue
		}
		f += 2 * prod
		if n.from >= 0 { // the input gradient (not of the batch)
			f += prod
		}
	}
	return f
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
		case KindBatchNorm:
			s = n.Name
		case kindAdd:
			s = "+"
		}
		parts = append(parts, s)
	}
	if len(parts) > 16 { // ResNets: the ends, and how many
		parts = append(append(parts[:5:5], fmt.Sprintf("… (%d layers) …", len(parts)-8)), parts[len(parts)-3:]...)
	}
	return fmt.Sprintf("%v: %s", *a.Input, strings.Join(parts, ", "))
}
