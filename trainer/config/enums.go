package config

import (
	"fmt"
	"strings"

	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/model"
)

// Sync is how the ranks combine their gradients (--sync). Each is a unit
// of package trainer's strategy registry (its strategy.go), which
// registers the unit's Rules here (config.go's Register).
type Sync uint8

const (
	// SyncAllreduce: every rank computes its share of a global batch and the
	// ranks sum the gradients with one AllReduce per step (trainer/allreduce).
	SyncAllreduce Sync = iota
	// SyncPS: ranks 0..Servers-1 are parameter servers, the others workers
	// that pull weights and push gradients (trainer/paramserver).
	SyncPS
	// SyncDPSGD: decentralized parallel SGD (Lian et al., NeurIPS'17):
	// every rank keeps its own model and, at each step, averages it with
	// its neighbours on Config.Topology while it computes its gradient
	// (trainer/decentral/sync_dpsgd.go). No server, no global collective per step.
	SyncDPSGD
	// SyncADPSGD: asynchronous decentralized parallel SGD (Lian et al.,
	// ICML'18): no barrier at all; active ranks average their model with one
	// random passive neighbour at a time (trainer/decentral/sync_adpsgd.go).
	SyncADPSGD
)

var syncNames = [...]string{SyncAllreduce: "allreduce", SyncPS: "ps", SyncDPSGD: "dpsgd", SyncADPSGD: "adpsgd"}

// Syncs lists the names --sync accepts.
var Syncs = syncNames[:]

// String returns the command line's name ("allreduce", "ps", "dpsgd", "adpsgd").
func (s Sync) String() string { return enumString(Syncs, int(s), "Sync") }

// ParseSync reads "allreduce", "ps", "dpsgd" or "adpsgd".
func ParseSync(s string) (Sync, error) {
	i, err := parseEnum(Syncs, s, "sync")
	return Sync(i), err
}

// Set parses s (flag.Value).
func (s *Sync) Set(v string) (err error) { *s, err = ParseSync(v); return err }

// MarshalText returns the name.
func (s Sync) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses a name.
func (s *Sync) UnmarshalText(b []byte) error { return s.Set(string(b)) }

// ModelKind is the model a job trains (--model).
type ModelKind uint8

const (
	// MLP is a multi-layer perceptron: Hidden ReLU layers, softmax on top.
	MLP ModelKind = iota
	// Softmax is multinomial logistic regression (one linear layer).
	Softmax
	// Logreg is binary logistic regression on dense data.
	Logreg
	// SparseLogreg is binary logistic regression on sparse data through the
	// parameter server, pulling and pushing only the keys a batch touches.
	SparseLogreg
	// LeNet5 is the convolutional network model.LeNet5 on images (e.g.
	// Fashion-MNIST's 1×28×28).
	LeNet5
	// NetFile is a network read from a model file (Config.Net).
	NetFile
	// ResNet20 is He et al.'s CIFAR ResNet-20 (model.ResNet20), with batch
	// norm and residual blocks, on images (CIFAR-10's 3×32×32).
	ResNet20
	// VGG16 is VGG-16 with batch norm and dropout (model.VGG16,
	// torchvision's vgg16_bn layout).
	VGG16
	// ResNet50 is ResNet-50's bottleneck blocks (model.ResNet50,
	// torchvision's resnet50; CIFAR's stem below 64×64).
	ResNet50
	// AlexNet is AlexNet with local response normalisation and dropout
	// for CIFAR-sized images (model.AlexNet).
	AlexNet
	// GPT is nanoGPT's GPT on a byte-level text (model.GPT; Config.GPT,
	// Data.SeqLen).
	GPT
)

// GPTShape is the gpt model's blocks, heads and width (0: the
// default's, DefaultGPT).
type GPTShape struct {
	Layers int `json:"layers,omitempty"`
	Heads  int `json:"heads,omitempty"`
	Embed  int `json:"embed,omitempty"`
}

// DefaultGPT is the gpt model's default shape: small enough for a CPU (4
// blocks of 4 heads, 128 wide; about 0.85M parameters at 128 tokens).
var DefaultGPT = GPTShape{Layers: 4, Heads: 4, Embed: 128}

// Params is the gpt's parameter count on seqLen tokens of text's
// vocabulary, in float64 (it may be too large for an int): the
// embeddings, 12E² + 13E per block, the final layer norm.
func (g GPTShape) Params(seqLen int) float64 {
	g = g.OrDefaults()
	e, l := float64(g.Embed), float64(g.Layers)
	return float64(data.TextVocab+seqLen)*e + l*(12*e*e+13*e) + 2*e
}

// OrDefaults is g with DefaultGPT's values where g has 0.
func (g GPTShape) OrDefaults() GPTShape {
	if g.Layers == 0 {
		g.Layers = DefaultGPT.Layers
	}
	if g.Heads == 0 {
		g.Heads = DefaultGPT.Heads
	}
	if g.Embed == 0 {
		g.Embed = DefaultGPT.Embed
	}
	return g
}

// netPresets are the network presets by model kind: their layers for
// samples of a shape and classes, and the samples they are for (an
// error's hint).
var netPresets = map[ModelKind]struct {
	layers func(g GPTShape, classes int, in model.Shape) []model.LayerSpec
	takes  string
}{
	LeNet5:   {func(_ GPTShape, c int, _ model.Shape) []model.LayerSpec { return model.LeNet5(c) }, "images such as Fashion-MNIST's 1×28×28"},
	ResNet20: {func(_ GPTShape, c int, _ model.Shape) []model.LayerSpec { return model.ResNet20(c) }, "images such as CIFAR-10's 3×32×32"},
	VGG16:    {func(_ GPTShape, c int, in model.Shape) []model.LayerSpec { return model.VGG16(c, in) }, "images such as CIFAR-10's 3×32×32 (five 2×2 pools: at least 32×32)"},
	ResNet50: {func(_ GPTShape, c int, in model.Shape) []model.LayerSpec { return model.ResNet50(c, in) }, "images such as CIFAR-10's 3×32×32 or ImageNet's 3×224×224"},
	AlexNet:  {func(_ GPTShape, c int, _ model.Shape) []model.LayerSpec { return model.AlexNet(c) }, "images such as CIFAR-10's 3×32×32 (three 3×3 stride-2 pools: at least 15×15)"},
	GPT: {func(g GPTShape, c int, in model.Shape) []model.LayerSpec {
		g = g.OrDefaults()
		return model.GPT(model.GPTConfig{Layers: g.Layers, Heads: g.Heads, Embed: g.Embed, SeqLen: in.T}, c)
	}, "a byte-level text: --data text --train FILE"},
}

// IsPreset reports whether m is a network preset (lenet5, resnet20, vgg16,
// resnet50).
func (m ModelKind) IsPreset() bool { _, ok := netPresets[m]; return ok }

// IsNetwork reports whether m is a network of layers: a preset or a model
// file.
func (m ModelKind) IsNetwork() bool { return m.IsPreset() || m == NetFile }

var modelNames = [...]string{MLP: "mlp", Softmax: "softmax", Logreg: "logreg", SparseLogreg: "sparse-logreg", LeNet5: "lenet5", NetFile: "file", ResNet20: "resnet20", VGG16: "vgg16", ResNet50: "resnet50", AlexNet: "alexnet", GPT: "gpt"}

// Models lists the model names.
var Models = modelNames[:]

// String returns the command line's name.
func (m ModelKind) String() string { return enumString(modelNames[:], int(m), "ModelKind") }

// ParseModel reads a model name.
func ParseModel(s string) (ModelKind, error) {
	i, err := parseEnum(modelNames[:], s, "model")
	return ModelKind(i), err
}

// Set parses s (flag.Value).
func (m *ModelKind) Set(v string) (err error) { *m, err = ParseModel(v); return err }

// MarshalText returns the name.
func (m ModelKind) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText parses a name.
func (m *ModelKind) UnmarshalText(b []byte) error { return m.Set(string(b)) }

func enumString(names []string, i int, typ string) string {
	if i >= 0 && i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("%s(%d)", typ, i)
}

func parseEnum(names []string, s, what string) (int, error) {
	for i, n := range names {
		if s == n {
			return i, nil
		}
	}
	return 0, fmt.Errorf("unknown %s %q (want %s)", what, s, strings.Join(names, ", "))
}
