package model

import "testing"

// TestPresetSizes pins the presets' parameter counts and FLOPs (those of
// the PyTorch modules in bench/torch; LeNet-5's FLOPs as compare.sh
// counts them) and their first and last parameter names.
func TestPresetSizes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     Shape
		layers []LayerSpec
		params int
		flops  int64
		first  string
		last   string
	}{
		{"lenet5", Shape{C: 1, H: 28, W: 28}, LeNet5(10), 61706, 2263920, "conv1.weight", "fc3.bias"},
		{"resnet20", Shape{C: 3, H: 32, W: 32}, ResNet20(10), 272474, 243994368, "conv1.weight", "fc.bias"},
		// torchvision's vgg16_bn and resnet50 at 1000 classes (their
		// published counts), and the CIFAR forms at 10.
		{"vgg16-224", Shape{C: 3, H: 224, W: 224}, VGG16(1000, Shape{C: 3, H: 224, W: 224}), 138365992, 0, "features.0.weight", "classifier.6.bias"},
		{"resnet50-224", Shape{C: 3, H: 224, W: 224}, ResNet50(1000, Shape{C: 3, H: 224, W: 224}), 25557032, 0, "conv1.weight", "fc.bias"},
		{"vgg16", Shape{C: 3, H: 32, W: 32}, VGG16(10, Shape{C: 3, H: 32, W: 32}), 15253578, 0, "features.0.weight", "classifier.6.bias"},
		{"resnet50", Shape{C: 3, H: 32, W: 32}, ResNet50(10, Shape{C: 3, H: 32, W: 32}), 23520842, 0, "conv1.weight", "fc.bias"},
		{"alexnet", Shape{C: 3, H: 32, W: 32}, AlexNet(10), 28714826, 0, "features.0.weight", "classifier.6.bias"},
	} {
		classes := 10
		if tc.in.H == 224 {
			classes = 1000
		}
		a, err := NewNet(tc.in, tc.layers, classes, SoftmaxCE)
		if err != nil {
			t.Fatal(err)
		}
		ts := a.Tensors()
		if tc.params != 0 && a.NumParams() != tc.params || ts[0].Name != tc.first || ts[len(ts)-1].Name != tc.last {
			t.Errorf("%s: %d parameters, tensors %s … %s; want %d, %s … %s", tc.name, a.NumParams(), ts[0].Name, ts[len(ts)-1].Name, tc.params, tc.first, tc.last)
		}
		if tc.flops != 0 && a.TrainFLOPs() != tc.flops {
			t.Errorf("%s: %d FLOPs per sample, want %d", tc.name, a.TrainFLOPs(), tc.flops)
		}
		t.Logf("%s: %d parameters, %d training FLOPs per sample", tc.name, a.NumParams(), a.TrainFLOPs())
	}
}

// TestInPlace: ResNet-20's nine residual adds work in their first input's
// buffers (its block's last batch norm), as do its ReLUs; an add onto a
// ReLU's output (whose backward reads that output) or onto a node that
// shares its own input's buffers does not, nor one whose first input has
// another reader.
func TestInPlace(t *testing.T) {
	arch, err := NewNet(Shape{C: 3, H: 32, W: 32}, ResNet20(10), 10, SoftmaxCE)
	if err != nil {
		t.Fatal(err)
	}
	ns := arch.mustNodes()
	adds := 0
	for i, in := range inPlace(ns) {
		if ns[i].Kind == kindAdd {
			if !in {
				t.Errorf("%s: not in place", ns[i].label(i))
			}
			adds++
		}
	}
	if adds != 9 {
		t.Errorf("%d adds, want 9", adds)
	}
	conv := func(from int) node { return node{LayerSpec: LayerSpec{Kind: KindConv}, from: from} }
	for _, c := range []struct {
		name string
		ns   []node
		want bool
	}{
		{"onto a batch norm", []node{conv(-1), {LayerSpec: LayerSpec{Kind: KindBatchNorm}, from: 0}, {LayerSpec: LayerSpec{Kind: kindAdd}, from: 1, plus: 0}}, true},
		{"onto a ReLU", []node{conv(-1), {LayerSpec: LayerSpec{Kind: KindReLU}, from: 0}, {LayerSpec: LayerSpec{Kind: kindAdd}, from: 1, plus: 0}}, false},
		{"onto an in-place flatten", []node{conv(-1), {LayerSpec: LayerSpec{Kind: KindFlatten}, from: 0}, conv(-1), {LayerSpec: LayerSpec{Kind: kindAdd}, from: 1, plus: 2}}, false},
		{"onto a flatten with its own buffers", []node{conv(-1), {LayerSpec: LayerSpec{Kind: KindFlatten}, from: 0}, {LayerSpec: LayerSpec{Kind: kindAdd}, from: 1, plus: 0}}, true},
		{"onto a twice-read output", []node{conv(-1), conv(0), {LayerSpec: LayerSpec{Kind: kindAdd}, from: 1, plus: 1}}, false},
		{"onto the batch", []node{{LayerSpec: LayerSpec{Kind: kindAdd}, from: -1, plus: -1}}, false},
	} {
		in := inPlace(c.ns)
		if got := in[len(c.ns)-1]; got != c.want {
			t.Errorf("an add %s: in place %v, want %v", c.name, got, c.want)
		}
	}
}
