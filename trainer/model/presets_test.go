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
	} {
		a, err := NewNet(tc.in, tc.layers, 10, SoftmaxCE)
		if err != nil {
			t.Fatal(err)
		}
		ts := a.Tensors()
		if a.NumParams() != tc.params || ts[0].Name != tc.first || ts[len(ts)-1].Name != tc.last {
			t.Errorf("%s: %d parameters, tensors %s … %s; want %d, %s … %s", tc.name, a.NumParams(), ts[0].Name, ts[len(ts)-1].Name, tc.params, tc.first, tc.last)
		}
		if tc.flops != 0 && a.TrainFLOPs() != tc.flops {
			t.Errorf("%s: %d FLOPs per sample, want %d", tc.name, a.TrainFLOPs(), tc.flops)
		}
		t.Logf("%s: %d parameters, %d training FLOPs per sample", tc.name, a.NumParams(), a.TrainFLOPs())
	}
}
