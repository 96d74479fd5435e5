package model

import (
	"strings"
	"testing"
)

// TestParseNetFile: a model file's layers are read as written; typos,
// layers without a kind, empty files and oversized ones are refused in one
// line that says where.
func TestParseNetFile(t *testing.T) {
	good := `# a comment
layers:
  - {kind: conv, name: conv1, out: 6, kernel: 5, pad: 2}
  - {kind: relu}
  - kind: maxpool
    kernel: 2
  - {kind: flatten}
  - {kind: linear, name: fc, out: 10, no_bias: true}
`
	layers, err := ParseNetFile(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	want := []LayerSpec{{Kind: KindConv, Name: "conv1", Out: 6, Kernel: 5, Pad: 2}, {Kind: KindReLU}, {Kind: KindMaxPool, Kernel: 2},
		{Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 10, NoBias: true}}
	if len(layers) != len(want) {
		t.Fatalf("layers %+v, want %+v", layers, want)
	}
	for i := range want {
		if layers[i] != want[i] {
			t.Errorf("layer %d: %+v, want %+v", i, layers[i], want[i])
		}
	}
	a, err := NewNet(Shape{C: 1, H: 28, W: 28}, layers, 10, SoftmaxCE)
	if err != nil || a.NumParams() != 6*25+6+6*14*14*10 {
		t.Errorf("the network: %v, %d parameters", err, a.NumParams())
	}
	for _, tc := range []struct{ file, want string }{
		{"layers:\n  - {kind: conv, name: c, out: 6, kernal: 5}\n", `line 2: unknown key "kernal"`},
		{"layers:\n  - {name: c, out: 6}\n", "layer 0: no kind"},
		{"", "empty"},
		{"layers: []\n", "no layers"},
		{"layerz:\n  - {kind: relu}\n", `unknown key "layerz"`},
		{"layers:\n  - {kind: relu\n", "line"},
		{"layers:\n" + strings.Repeat("  - {kind: relu}\n", MaxNetFileBytes/16), "more than"},
		// Said in the file's words, not Go's types; every key listed.
		{"layers: 5\n", "into a list of layers"},
		{"- {kind: relu}\n", "into a model file (want layers:"},
		{"layers:\n  - 7\n", "into a layer"},
		{"layers:\n  - {kind: lrn, size: 5, bogus: 1}\n", "alpha, beta, k, heads, rows"},
		{"layers:\n  - {kind: relu}\n---\nlayers:\n  - {kind: relu}\n", "more than one YAML document"},
	} {
		_, err := ParseNetFile(strings.NewReader(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "model.") {
			t.Errorf("%.40q: %v, want one line containing %q", tc.file, err, tc.want)
		}
	}
}

// TestNetFileRefuses (issue 29): a size that is not a whole number, an
// over-long or path-like layer name, and a batch norm reading the data are
// refused when the network is read or placed, naming the layer.
func TestNetFileRefuses(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"layers:\n - {kind: conv, name: c, out: 7.9, kernel: 3}\n", `out: "7.9" is not a whole number`},
		{"layers:\n - {kind: conv, name: c, out: 7, kernel: 5.9}\n", `kernel: "5.9" is not a whole number`},
		{"layers:\n - {kind: conv, name: c, out: 7, kernel: 1e1}\n", `kernel: "1e1" is not a whole number`},
		{"layers:\n - {kind: maxpool, kernel: 2, stride: \"2\"}\n", "cannot unmarshal"},
	} {
		if _, err := ParseNetFile(strings.NewReader(c.yaml)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
	}
	in := Shape{C: 1, H: 8, W: 8}
	for _, c := range []struct {
		layers []LayerSpec
		want   string
	}{
		{[]LayerSpec{{Kind: KindConv, Name: strings.Repeat("x", 70000), Out: 2, Kernel: 3}, {Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 4}}, "70000 bytes long"},
		{[]LayerSpec{{Kind: KindConv, Name: "a/b", Out: 2, Kernel: 3}, {Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 4}}, "contains '/'"},
		{[]LayerSpec{{Kind: KindConv, Name: "a..b", Out: 2, Kernel: 3}, {Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 4}}, "'..'"},
		{[]LayerSpec{{Kind: KindConv, Name: "a\x01", Out: 2, Kernel: 3}, {Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 4}}, "control character"},
		{[]LayerSpec{{Kind: KindBatchNorm, Name: "bn"}, {Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 4}}, "cannot read the data itself"},
		// A block's sum is placed by the block only (it has no input to
		// add); unregistered kinds are named with the registry's list.
		{[]LayerSpec{{Kind: kindAdd}, {Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 4}}, `layer 0 (add): unknown kind "add" (want attention, avgpool, batchnorm, block, bottleneck, conv, dropout, embedding, flatten, gelu, gptblock, layernorm, linear, lrn, maxpool, posembed, relu, tiedlinear)`},
		{[]LayerSpec{{Kind: "swish"}, {Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 4}}, `unknown kind "swish"`},
		{[]LayerSpec{{Kind: KindFlatten}, {Kind: KindLinear, Name: "fc0", Out: 4}, {Kind: KindGELU, Approximate: "erf"}, {Kind: KindLinear, Name: "fc", Out: 4}}, `approximate "erf": want none or tanh`},
		{[]LayerSpec{{Kind: KindConv, Name: "c", Out: 2, Kernel: 3}, {Kind: KindLayerNorm, Name: "ln"}, {Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 4}}, "put a flatten before it"},
		{[]LayerSpec{{Kind: KindFlatten}, {Kind: KindDropout}, {Kind: KindLinear, Name: "fc", Out: 4}}, "p 0: want 0 < p < 1"},
		{[]LayerSpec{{Kind: KindConv, Name: "c", Out: 2, Kernel: 3}, {Kind: KindLRN}, {Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 4}}, "size 0: want the channels each window spans"},
		{[]LayerSpec{{Kind: KindFlatten}, {Kind: KindDropout, P: 1}, {Kind: KindLinear, Name: "fc", Out: 4}}, "p 1: want 0 < p < 1"},
		{[]LayerSpec{{Kind: KindFlatten}, {Kind: KindDropout, P: 0.5, Out: 3}, {Kind: KindLinear, Name: "fc", Out: 4}}, "takes no settings but p"},
	} {
		if _, err := NewNet(in, c.layers, 4, SoftmaxCE); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.60v: %v, want %q", c.layers, err, c.want)
		}
	}
	// Names as dml's presets and PyTorch write them still pass.
	if _, err := NewNet(Shape{C: 3, H: 32, W: 32}, ResNet20(10), 10, SoftmaxCE); err != nil {
		t.Error(err)
	}
}
