package model

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
