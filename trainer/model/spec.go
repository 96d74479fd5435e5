package model

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dml-project/dml/trainer/data"
)

// A network as a preset or a model file describes it: its layers' specs
// (LayerSpec) and, placed, its nodes (node).

// Shape is one sample's shape (data.Shape): C channels of H×W.
type Shape = data.Shape

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
	// Approximate is GELU's form: "" or "none" (erf), or "tanh"
	// (nn.GELU's approximate).
	Approximate string `json:"approximate,omitempty" yaml:"approximate"`
	// P is dropout's rate: the share of elements zeroed (0 < p < 1).
	P float64 `json:"p,omitempty" yaml:"p"`
	// Size, Alpha, Beta and K are local response normalisation's
	// (nn.LocalResponseNorm's; 0: its defaults, but Size, which is
	// needed).
	Size  int     `json:"size,omitempty" yaml:"size"`
	Alpha float64 `json:"alpha,omitempty" yaml:"alpha"`
	Beta  float64 `json:"beta,omitempty" yaml:"beta"`
	K     float64 `json:"k,omitempty" yaml:"k"`
	// Heads is attention's (and a GPT block's) number of heads.
	Heads int `json:"heads,omitempty" yaml:"heads"`
	// Rows is an embedding's table rows: the vocabulary (embedding) or
	// the longest sequence (posembed).
	Rows int `json:"rows,omitempty" yaml:"rows"`
	// Std, where not 0, draws a linear or embedding layer's weight from
	// N(0, Std²) with a zero bias (nanoGPT's init) instead of the kind's
	// default (PyTorch's module init).
	Std float64 `json:"std,omitempty" yaml:"std"`
	// Tie names the embedding whose table a tiedlinear layer uses as its
	// weight (nanoGPT's lm_head, tied to transformer.wte).
	Tie string `json:"tie,omitempty" yaml:"tie"`
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
	tie     int // tiedlinear: the embedding node whose table it uses
}

// label names a layer for an error: "layer 3 (conv2)".
func (l LayerSpec) label(i int) string {
	if l.Name != "" {
		return fmt.Sprintf("layer %d (%s %s)", i, l.Kind, l.Name)
	}
	return fmt.Sprintf("layer %d (%s)", i, l.Kind)
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
