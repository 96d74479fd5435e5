package model

import "fmt"

// Presets: networks by name, with PyTorch's state_dict names for their
// parameters (bench/torch has the equivalent torch.nn modules).

// LeNet5 is LeCun et al.'s LeNet-5 as PyTorch's tutorials write it for
// 1×28×28 images: conv1 1→6 k5 pad 2, ReLU, max pool 2, conv2 6→16 k5,
// ReLU, max pool 2, flatten (16×5×5 = 400), fc1 400→120, ReLU, fc2
// 120→84, ReLU, fc3 84→classes. Its input channels follow the data's.
func LeNet5(classes int) []LayerSpec {
	return []LayerSpec{
		{Kind: KindConv, Name: "conv1", Out: 6, Kernel: 5, Pad: 2},
		{Kind: KindReLU},
		{Kind: KindMaxPool, Kernel: 2},
		{Kind: KindConv, Name: "conv2", Out: 16, Kernel: 5},
		{Kind: KindReLU},
		{Kind: KindMaxPool, Kernel: 2},
		{Kind: KindFlatten},
		{Kind: KindLinear, Name: "fc1", Out: 120},
		{Kind: KindReLU},
		{Kind: KindLinear, Name: "fc2", Out: 84},
		{Kind: KindReLU},
		{Kind: KindLinear, Name: "fc3", Out: classes},
	}
}

// ResNet20 is He et al.'s CIFAR ResNet-20 (3×32×32 images): conv1 3×3 16
// channels (no bias), bn1, ReLU; three stages of three basic blocks of 16,
// 32 and 64 channels (layer1 … layer3; the first block of stages 2 and 3
// has stride 2 and a 1×1 conv + batch norm shortcut); global average
// pooling; fc 64 → classes.
func ResNet20(classes int) []LayerSpec {
	ls := []LayerSpec{
		{Kind: KindConv, Name: "conv1", Out: 16, Kernel: 3, Pad: 1, NoBias: true},
		{Kind: KindBatchNorm, Name: "bn1"},
		{Kind: KindReLU},
	}
	for stage, ch := range []int{16, 32, 64} {
		for b := range 3 {
			s := 1
			if b == 0 && stage > 0 {
				s = 2
			}
			ls = append(ls, LayerSpec{Kind: KindBlock, Name: fmt.Sprintf("layer%d.%d", stage+1, b), Out: ch, Stride: s})
		}
	}
	return append(ls, LayerSpec{Kind: KindAvgPool}, LayerSpec{Kind: KindFlatten}, LayerSpec{Kind: KindLinear, Name: "fc", Out: classes})
}
