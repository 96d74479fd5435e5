// Package model is what a rank trains: the architecture (Arch: an MLP's
// sizes, or a network of layers from a preset or a model file, with a
// loss on top) and its flat parameter layout, the Model that runs forward
// and backward passes on a kernels.Backend, the Optimizer that applies an
// update rule (kernels/optim) to the parameters on the same backend, and
// the .npz weight files (SaveNPZ, LoadNPZ) with PyTorch's state_dict
// names. Each layer kind is one unit (layer.go: the layerKind interface
// and the registry; layer_*.go: one kind each, registering itself). It knows nothing of ranks
// or sync strategies: package trainer drives it.
package model

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Loss is a model's output loss.
type Loss int

const (
	// SoftmaxCE is softmax cross-entropy over Classes outputs.
	SoftmaxCE Loss = iota
	// SigmoidCE is the binary logistic loss on one output.
	SigmoidCE
	// TokenCE is next-token softmax cross-entropy on a token sequence (an
	// input Shape with T > 0): a row holds T+1 tokens, the network reads
	// the first T and its logits at each position (Classes, the
	// vocabulary) are scored against the token after it. The loss and
	// the correct count are the means over the positions (nanoGPT's
	// F.cross_entropy over B·T, per sample), so a sample weighs one.
	TokenCE
)

// Layer is one layer with parameters, placed in the flat parameter
// vector: its weight, row-major in PyTorch's layout (nn.Linear's [out, in],
// nn.Conv2d's [out, in, k, k]), then its bias of Out values, if it has one.
type Layer struct {
	Kind    string // a kind with parameters: KindLinear, KindConv, KindBatchNorm
	Name    string // the parameters' prefix: layerK for an MLP, the network's name ("conv1")
	In, Out int    // In: the inputs each output sums over (fan-in: in features, or in channels × k × k)
	WShape  []int  // the weight's shape
	// Std, where not 0, draws the weight from N(0, Std²) and sets the
	// bias to 0 (nanoGPT's init; LayerSpec.Std) instead of the kind's
	// default.
	Std  float64
	WOff int // offset of the weight in the flat vector
	BOff int // offset of the bias (= End without one)
	End  int // one past the layer's last parameter
}

// HasBias reports whether the layer has a bias.
func (l Layer) HasBias() bool { return l.End > l.BOff }

// Arch is a model's shape: the whole of what a checkpoint needs to
// rebuild it. An MLP is Sizes alone (a stack of linear layers with ReLU
// between them; Sizes[0] inputs, Sizes[k] outputs of layer k-1); a
// network (NewNet) has its input shape and its layers, and Sizes is
// [inputs, classes]. Loss is on top of either.
type Arch struct {
	Sizes []int
	Loss  Loss
	Input *Shape      `json:",omitempty"`
	Net   []LayerSpec `json:",omitempty"`
}

// NewArch builds an architecture: input features, hidden sizes (none for
// softmax or logistic regression), outputs.
func NewArch(inputs int, hidden []int, outputs int, loss Loss) (Arch, error) {
	sizes := append(append([]int{inputs}, hidden...), outputs)
	for i, s := range sizes {
		if s <= 0 {
			return Arch{}, fmt.Errorf("layer size %d (position %d of %v) must be positive", s, i, sizes)
		}
	}
	if loss == SigmoidCE && outputs != 1 {
		return Arch{}, fmt.Errorf("logistic loss needs 1 output, got %d", outputs)
	}
	// The parameter count, checked for overflow: past MaxParams no machine
	// holds the model, and NumParams and every byte count derived from it
	// (×4, ×layers) stay far inside an int.
	n := 0
	for k := 0; k+1 < len(sizes); k++ {
		in, out := sizes[k], sizes[k+1]
		if in > MaxParams/out || n > MaxParams-in*out-out {
			return Arch{}, fmt.Errorf("model %v has more than %d parameters (layer %d alone: %d × %d): %w", sizes, MaxParams, k, in, out, ErrTooLarge)
		}
		n += in*out + out
	}
	return Arch{Sizes: sizes, Loss: loss}, nil
}

// MaxParams bounds a model's parameter count (2^40: 4 TiB of float32
// weights), so that no size computed from it can overflow.
const MaxParams = 1 << 40

// ErrTooLarge is wrapped by NewArch's error for a model of more than
// MaxParams parameters.
var ErrTooLarge = errors.New("model too large")

// Layers lays the layers out in the flat vector: layer 0's weight and bias,
// then layer 1's, and so on. The gradient uses the same layout, so the
// backward pass, which finishes the last layer first, completes a growing
// suffix of the gradient: once layer k is done, everything from its WOff to
// the end is final (see GradHook). A bucketed AllReduce can therefore send
// contiguous pieces while the earlier layers are still being computed.
func (a Arch) Layers() []Layer {
	var ls []Layer
	off := 0
	for _, n := range a.mustNodes() {
		if n.param < 0 {
			continue
		}
		w, fan := n.kind().weight(n)
		l := Layer{Kind: n.Kind, Name: n.Name, In: fan, Out: n.Out, WShape: w, WOff: off, Std: n.Std}
		l.BOff = off + l.In*l.Out
		l.End = l.BOff
		if !n.NoBias {
			l.End += l.Out
		}
		off = l.End
		ls = append(ls, l)
	}
	return ls
}

// Tensor is one named array of a model's parameters: its .npz name (as
// PyTorch's state_dict names it, but for the layer names), its shape, and
// where it lies in the flat vector.
type Tensor struct {
	Name  string
	Shape []int
	Off   int
}

// Len is the number of values.
func (t Tensor) Len() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Tensors lists the model's parameter arrays in the order of the flat
// vector: for layer k, "layerK.weight" [out, in], then "layerK.bias"
// [out]. The .npz files (--save) and checkpoints name and shape their
// arrays by it.
func (a Arch) Tensors() []Tensor {
	var ts []Tensor
	for _, l := range a.Layers() {
		ts = append(ts, Tensor{l.Name + ".weight", l.WShape, l.WOff})
		if l.HasBias() {
			ts = append(ts, Tensor{l.Name + ".bias", []int{l.Out}, l.BOff})
		}
	}
	return ts
}

// NumParams is the length of the flat parameter vector.
func (a Arch) NumParams() int {
	ls := a.Layers()
	return ls[len(ls)-1].End
}

// LayerOf names the layer and tensor that flat index i belongs to
// ("layer1.weight"), for error messages.
func (a Arch) LayerOf(i int) string {
	for _, t := range a.Tensors() {
		if i >= t.Off && i < t.Off+t.Len() {
			return t.Name
		}
	}
	return fmt.Sprintf("index %d", i)
}

// InitParams fills a flat vector as PyTorch's modules do by default,
// layer by layer (layerKind.init), from the given seed: nn.Linear and
// nn.Conv2d's weights and biases uniform in ±1/√fan_in (kaiming_uniform
// with a = √5), batch norm's γ = 1, β = 0.
func (a Arch) InitParams(seed uint64) []float32 {
	p := make([]float32, a.NumParams())
	rng := rand.New(rand.NewPCG(seed, 0x6d6c70))
	for _, l := range a.Layers() {
		if l.Std != 0 {
			normalInit(l, p[l.WOff:l.End], rng)
			continue
		}
		kinds[l.Kind].(layerKind).init(l, p[l.WOff:l.End], rng)
	}
	return p
}

// normalInit is nanoGPT's init of a Linear or an Embedding: the weight
// from N(0, l.Std²), the bias 0.
func normalInit(l Layer, p []float32, rng *rand.Rand) {
	for i := range l.BOff - l.WOff {
		p[i] = float32(rng.NormFloat64() * l.Std)
	}
	clear(p[l.BOff-l.WOff:])
}

// Aliases are the names under which a tied weight is saved a second time
// (nanoGPT's lm_head.weight, the token embedding's table): .npz files
// carry them, so that PyTorch's load_state_dict(strict=True) finds every
// key, and ParamsFrom accepts them where they equal the weight they
// alias. They are not in Tensors, which partition the flat vector.
func (a Arch) Aliases() []Tensor {
	var ts []Tensor
	if len(a.Net) == 0 {
		return nil
	}
	ns := a.mustNodes()
	ls := a.Layers()
	for _, n := range ns {
		if a, ok := kinds[n.Kind].(aliaser); ok {
			ts = append(ts, a.alias(n, ns, ls))
		}
	}
	return ts
}

// ErrNonFinite reports a loss or gradient that became NaN or ±Inf.
var ErrNonFinite = errors.New("training diverged")

// CheckFinite looks for NaN and ±Inf in a host copy of a gradient in the
// Layers layout (the reduced gradient a rank already holds, so no device
// call is needed) and in the loss, and names the tensors that went bad
// ("layer1.weight, layer1.bias") in an error wrapping ErrNonFinite.
func (a Arch) CheckFinite(grad []float32, lossSum float64) error {
	var bad []string
	// One pass over the whole gradient (in parallel when large); the
	// per-tensor scans that name the bad ones only run after it failed.
	clean := AllFinite(grad[:a.NumParams()])
	for _, t := range a.Tensors() {
		if clean {
			break
		}
		if !AllFinite(grad[t.Off : t.Off+t.Len()]) {
			bad = append(bad, t.Name)
		}
	}
	switch {
	case len(bad) > 0:
		return fmt.Errorf("non-finite gradient in %s (loss %v): lower Config.Opt.LR or check the data: %w",
			strings.Join(bad, ", "), lossSum, ErrNonFinite)
	case math.IsNaN(lossSum) || math.IsInf(lossSum, 0):
		return fmt.Errorf("loss is %v: lower Config.Opt.LR or check the data: %w", lossSum, ErrNonFinite)
	}
	return nil
}
