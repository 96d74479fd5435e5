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

// VGG16 is Simonyan and Zisserman's VGG-16 with batch norm, torchvision's
// vgg16_bn layout: features.0 … features.43 (thirteen 3×3 convolutions
// with bias, each followed by batch norm and ReLU, in stages of 64, 128,
// 256, 512 and 512 channels, each stage ending in a 2×2 max pool), then
// classifier.0 (linear), ReLU, dropout 0.5, classifier.3 (linear), ReLU,
// dropout 0.5, classifier.6 (linear to the classes). For 3×224×224 images
// it is torchvision's vgg16_bn (whose adaptive pool to 7×7 is then the
// identity), classifier width 4096; for CIFAR's 3×32×32 the features end
// in 512×1×1 and the classifier is 512 wide (the AD-PSGD paper's CIFAR
// VGG-16; torchvision would pool 1×1 up to 7×7 and keep 4096).
func VGG16(classes int, in Shape) []LayerSpec {
	var ls []LayerSpec
	i := 0 // torchvision's index in features
	for _, stage := range []struct{ ch, convs int }{{64, 2}, {128, 2}, {256, 3}, {512, 3}, {512, 3}} {
		for range stage.convs {
			ls = append(ls, LayerSpec{Kind: KindConv, Name: fmt.Sprintf("features.%d", i), Out: stage.ch, Kernel: 3, Pad: 1},
				LayerSpec{Kind: KindBatchNorm, Name: fmt.Sprintf("features.%d", i+1)}, LayerSpec{Kind: KindReLU})
			i += 3
		}
		ls = append(ls, LayerSpec{Kind: KindMaxPool, Kernel: 2})
		i++
	}
	width := 512
	if in.H >= 224 && in.W >= 224 {
		width = 4096
	}
	return append(ls, LayerSpec{Kind: KindFlatten},
		LayerSpec{Kind: KindLinear, Name: "classifier.0", Out: width}, LayerSpec{Kind: KindReLU}, LayerSpec{Kind: KindDropout, P: 0.5},
		LayerSpec{Kind: KindLinear, Name: "classifier.3", Out: width}, LayerSpec{Kind: KindReLU}, LayerSpec{Kind: KindDropout, P: 0.5},
		LayerSpec{Kind: KindLinear, Name: "classifier.6", Out: classes})
}

// ResNet50 is He et al.'s ResNet-50, torchvision's resnet50 layout: conv1,
// bn1, ReLU, then four stages of 3, 4, 6 and 3 bottleneck blocks (layer1
// … layer4; 64, 128, 256 and 512 wide, expansion 4, stride 2 on the first
// block of stages 2 to 4, a downsample shortcut where the shape changes),
// global average pooling, fc 2048 → classes. For images of 64 pixels a
// side or more its stem is torchvision's (conv1 7×7, stride 2, pad 3, and
// a 3×3 max pool, stride 2, pad 1): on 3×224×224 it is torchvision's
// resnet50; below, CIFAR's (conv1 3×3, stride 1, no max pool), the usual
// CIFAR ResNet-50, with the same keys.
func ResNet50(classes int, in Shape) []LayerSpec {
	ls := []LayerSpec{
		{Kind: KindConv, Name: "conv1", Out: 64, Kernel: 3, Pad: 1, NoBias: true},
		{Kind: KindBatchNorm, Name: "bn1"},
		{Kind: KindReLU},
	}
	if in.H >= 64 && in.W >= 64 {
		ls[0] = LayerSpec{Kind: KindConv, Name: "conv1", Out: 64, Kernel: 7, Stride: 2, Pad: 3, NoBias: true}
		ls = append(ls, LayerSpec{Kind: KindMaxPool, Kernel: 3, Stride: 2, Pad: 1})
	}
	for stage, st := range []struct{ width, blocks int }{{64, 3}, {128, 4}, {256, 6}, {512, 3}} {
		for b := range st.blocks {
			s := 1
			if b == 0 && stage > 0 {
				s = 2
			}
			ls = append(ls, LayerSpec{Kind: KindBottleneck, Name: fmt.Sprintf("layer%d.%d", stage+1, b), Out: st.width, Stride: s})
		}
	}
	return append(ls, LayerSpec{Kind: KindAvgPool}, LayerSpec{Kind: KindFlatten}, LayerSpec{Kind: KindLinear, Name: "fc", Out: classes})
}

// AlexNet is Krizhevsky et al.'s AlexNet for CIFAR-sized images (the
// DSSP paper's AlexNet on CIFAR-10 is not spelt out there; this is the
// original's structure at 32×32): five convolutions with ReLU, local
// response normalisation (size 5, α 1e-4, β 0.75, k 2, the original's)
// after the first two, overlapping 3×3 stride-2 max pools after the
// first, second and fifth; then dropout 0.5, a linear layer of 4096,
// ReLU, dropout, 4096, ReLU and the classes. Names are torchvision's
// alexnet layout (features.N, classifier.1, .4, .6), whose indices the
// two LRN layers shift; torchvision's own has no LRN, an 11×11 stride-4
// first layer and 6×6 pooled features, for 224×224 images.
func AlexNet(classes int) []LayerSpec {
	lrn := LayerSpec{Kind: KindLRN, Size: 5, Alpha: 1e-4, Beta: 0.75, K: 2}
	pool := LayerSpec{Kind: KindMaxPool, Kernel: 3, Stride: 2}
	conv := func(i, out, k, pad int) LayerSpec {
		return LayerSpec{Kind: KindConv, Name: fmt.Sprintf("features.%d", i), Out: out, Kernel: k, Pad: pad}
	}
	relu := LayerSpec{Kind: KindReLU}
	return []LayerSpec{
		conv(0, 64, 5, 2), relu, lrn, pool, // 32 → 15
		conv(4, 192, 5, 2), relu, lrn, pool, // 15 → 7
		conv(8, 384, 3, 1), relu,
		conv(10, 256, 3, 1), relu,
		conv(12, 256, 3, 1), relu, pool, // 7 → 3
		{Kind: KindFlatten},
		{Kind: KindDropout, P: 0.5}, {Kind: KindLinear, Name: "classifier.1", Out: 4096}, relu,
		{Kind: KindDropout, P: 0.5}, {Kind: KindLinear, Name: "classifier.4", Out: 4096}, relu,
		{Kind: KindLinear, Name: "classifier.6", Out: classes},
	}
}

// GPTConfig is a GPT's shape (nanoGPT's GPTConfig): blocks, heads, the
// width and the longest sequence (its position table's rows).
type GPTConfig struct {
	Layers, Heads, Embed, SeqLen int
}

// GPT is nanoGPT's GPT on a token sequence of vocab tokens: token and
// position embeddings (transformer.wte, transformer.wpe), Layers pre-norm
// blocks (transformer.h.K), a final layer norm (transformer.ln_f) and
// lm_head tied to wte; no dropout (nanoGPT's default 0). Its .npz keys and
// shapes are nanoGPT's state_dict's (bias=True), and its init nanoGPT's:
// weights N(0, 0.02²), the output projections' 0.02/√(2·Layers), biases
// 0, layer norms 1 and 0.
func GPT(c GPTConfig, vocab int) []LayerSpec {
	ls := []LayerSpec{
		{Kind: KindEmbedding, Name: "transformer.wte", Rows: vocab, Out: c.Embed, Std: 0.02},
		{Kind: KindPosEmbed, Name: "transformer.wpe", Rows: c.SeqLen, Std: 0.02},
	}
	for k := range c.Layers {
		ls = append(ls, LayerSpec{Kind: KindGPTBlock, Name: fmt.Sprintf("transformer.h.%d", k), Heads: c.Heads, Rows: c.Layers, Std: 0.02})
	}
	return append(ls,
		LayerSpec{Kind: KindLayerNorm, Name: "transformer.ln_f"},
		LayerSpec{Kind: KindTiedLinear, Name: "lm_head", Tie: "transformer.wte"})
}
