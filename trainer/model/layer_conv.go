package model

import (
	"fmt"

	"github.com/dml-project/dml/kernels"
)

// KindConv is a 2-D convolution, W [out, in, k, k] (nn.Conv2d), zero
// padding.
const KindConv = "conv"

// conv is a 2-D convolution (nn.Conv2d): W [out, in, k, k], zero padding
// on every side, a stride (default 1). Each one runs on the backend's
// library where it has one (kernels.WholeConvOf; a ConvChoice may say
// otherwise per layer), else on its direct stride-1 convolution where it
// runs the shape (kernels.DirectConvOf), else as Im2col and GEMMs in
// chunks of samples.
type conv struct{ base }

// convRun is what a Model's convolutions run with (conv.setup), beside
// the backend's kernels.ConvOps (Model.conv, which pooling shares).
type convRun struct {
	// chunkFloats bounds one chunk's columns (chunkFloats(B)).
	chunkFloats int
	// choice is NewChosen's, for setup.
	choice ConvChoice
	// cols: one chunk's columns (the largest c·k·k × chunk·oh·ow of any
	// conv layer; none when they are kept); convOut: one chunk's output
	// (or output gradient) in the GEMM's layout, out × chunk·oh·ow; ones
	// (chunk·oh·ow) for the bias as a rank-1 GEMM (Arch.convScratch).
	cols, convOut, ones kernels.Buffer
	// flip: for the conv layers whose input gradient runs as a
	// convolution of dY (node.flipped, or directDX), the weights flipped
	// and transposed (two buffers of the largest out·in·k·k), and
	// anti[k], the k²×k² anti-identity that flips a k×k kernel as a GEMM.
	flip kernels.Buffer
	anti map[int]kernels.Buffer
	// direct: the backend's direct stride-1 convolution, when it has one;
	// directFwd[i], directDX[i]: conv node i's forward pass and weight
	// gradient, and its input gradient, run on it (directConvs); wdirect
	// holds the weights in its layout.
	direct              kernels.DirectConvOps
	directFwd, directDX []bool
	wdirect             kernels.Buffer
	// whole: the backend's library-served convolutions (cuDNN, oneDNN),
	// when they run; lib[i], conv node i runs on them (every one, but
	// where a ConvChoice said otherwise), with no columns, no chunks and
	// no flipped weights.
	whole kernels.WholeConvOps
	lib   []bool
	// kept[i], for conv node i when every conv layer's columns for a whole
	// batch fit keepColsFloats: the forward pass's columns of each chunk
	// of samples, back to back, which the backward pass reuses instead of
	// running Im2col again.
	kept []kernels.Buffer
}

func (conv) place(n *node) error {
	if n.Out <= 0 || n.Kernel <= 0 {
		return fmt.Errorf("out %d and kernel %d must be positive", n.Out, n.Kernel)
	}
	asked := n.Stride
	n.Stride = max(asked, 1)
	if asked < 0 || n.Pad < 0 || n.Pad >= n.Kernel {
		return fmt.Errorf("stride %d and pad %d: want stride ≥ 1 and 0 ≤ pad < kernel %d", asked, n.Pad, n.Kernel)
	}
	oh, ow := convOut(n.in.H, n.in.W, n.Kernel, n.Stride, n.Pad)
	if oh == 0 {
		return fmt.Errorf("a %d×%d kernel is larger than its %d×%d input padded by %d", n.Kernel, n.Kernel, n.in.H, n.in.W, n.Pad)
	}
	n.out = Shape{C: n.Out, H: oh, W: ow}
	return nil
}

func (conv) weight(n node) ([]int, int) {
	return []int{n.Out, n.in.C, n.Kernel, n.Kernel}, n.in.C * n.Kernel * n.Kernel
}

// flops is the convolution as im2col's GEMM: out × in·k·k × output pixels.
func (conv) flops(n node) int64 {
	return 2 * int64(n.Out) * int64(n.fanIn()) * int64(n.out.H*n.out.W)
}

func (conv) describe(n node) string {
	s := fmt.Sprintf("%s %dk%d", n.Name, n.Out, n.Kernel)
	if n.Stride != 1 {
		s += fmt.Sprintf("s%d", n.Stride)
	}
	if n.Pad != 0 {
		s += fmt.Sprintf("p%d", n.Pad)
	}
	return s
}

// setup finds the backend's convolution ops, decides where each
// convolution runs (placeConvs) and allocates what they need beside
// their outputs (convBuffers).
func (conv) setup(m *Model, a *allocator) error {
	if err := m.findConvOps(KindConv); err != nil {
		return err
	}
	m.cv.chunkFloats = chunkFloats(m.B)
	m.placeConvs(m.B, m.cv.choice)
	m.convBuffers(a)
	return nil
}

// findConvOps finds the backend's kernels.ConvOps, which layers of kind
// need (convolution, pooling).
func (m *Model) findConvOps(kind string) error {
	if m.conv != nil {
		return nil
	}
	var err error
	m.conv, err = needOps(m, kernels.ConvOf, kind+" layers need convolution ops")
	return err
}

func (conv) forward(m *Model, i int, n node, x, y kernels.Buffer) error {
	return m.convForward(i, n, x, y)
}

// backward: the weight gradient and, unless the input is the batch, the
// input gradient (convBackward), then hook.
func (conv) backward(m *Model, i int, n node, x, dy kernels.Buffer, hook GradHook) error {
	var err error
	if n.from < 0 {
		err = m.convBackward(i, n, x, dy, nil)
	} else {
		err = m.give(n.from, func(dst kernels.Buffer) error { return m.convBackward(i, n, x, dy, dst) })
	}
	if err != nil {
		return err
	}
	return m.hooked(hook, n, i)
}

// convOut is kernels.ConvOut (model does not import kernels for it: the
// shapes are checked here, before any backend is involved).
func convOut(h, w, k, stride, pad int) (int, int) {
	if k <= 0 || stride <= 0 || pad < 0 || h+2*pad < k || w+2*pad < k {
		return 0, 0
	}
	return (h+2*pad-k)/stride + 1, (w+2*pad-k)/stride + 1
}

// ScratchFloats is what a Model of rows rows holds besides (and each
// layer's own scratch per sample, layerKind.scratch): the columns
// of one chunk of samples of a convolution (when they are not kept), its
// output in the GEMM's layout (out × chunk·oh·ow, for Transpose01), and
// the ones its bias products use.
func (a Arch) ScratchFloats(rows int) int {
	cols, out, ones := a.convScratch(rows, convChunkFloats)
	if a.KeptColumns(rows) > 0 {
		cols = 0
	}
	own := 0
	for _, n := range a.mustNodes() {
		own += n.kind().scratch(n)
	}
	return cols + out + ones + rows*own
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

func init() {
	register(KindConv, conv{})
}

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

// convBuffers allocates what the convolutions placed (placeConvs) need
// beside their outputs: columns kept or chunked, the GEMM layout's
// output, ones, the kernel flips and flipped weights, the direct
// kernels' weights.
func (m *Model) convBuffers(a *allocator) {
	b, arch, maxRows := m.B, m.Arch, m.MaxRows
	m.cv.kept = make([]kernels.Buffer, len(m.nodes))
	// The chunks of samples (and their scratch) serve every convolution
	// but a direct one whose input gradient is direct too or not wanted;
	// a direct convolution keeps no columns (its weight gradient needs
	// none; an input gradient by Col2im uses the scratch).
	chunked, unkept, keep := false, false, arch.KeptColumns(maxRows) > 0
	for i, n := range m.nodes {
		if n.Kind != KindConv || m.cv.lib[i] || m.cv.directFwd[i] && (n.from < 0 || m.cv.directDX[i]) {
			continue
		}
		chunked = true
		if keep && !m.cv.directFwd[i] {
			m.cv.kept[i] = a.alloc(n.Name+" columns", n.columns()*maxRows)
		} else {
			unkept = true
		}
	}
	if colsLen, outLen, onesLen := arch.convScratch(maxRows, m.cv.chunkFloats); chunked && colsLen > 0 {
		if unkept {
			m.cv.cols = a.alloc("convolution columns", colsLen)
		}
		m.cv.convOut = a.alloc("convolution output (GEMM layout)", outLen)
		m.cv.ones = a.alloc("ones", onesLen)
		a.then(func() error { return b.Fill(m.cv.ones, 1) })
	}
	m.cv.anti = map[int]kernels.Buffer{}
	flipLen, wdLen := 0, 0
	for i, n := range m.nodes {
		if m.cv.lib[i] || !n.flipped() && !m.cv.directDX[i] {
			continue
		}
		kk := n.Kernel * n.Kernel
		flipLen = max(flipLen, 2*n.Out*n.in.C*kk)
		if m.cv.anti[n.Kernel] == nil {
			j := a.alloc(fmt.Sprintf("%d×%d kernel flip", n.Kernel, n.Kernel), kk*kk)
			m.cv.anti[n.Kernel] = j
			a.then(func() error { return b.Upload(j, antiIdentity(kk)) })
		}
	}
	if flipLen > 0 {
		m.cv.flip = a.alloc("flipped convolution weights", flipLen)
	}
	for i, n := range m.nodes {
		if m.cv.directFwd[i] {
			wdLen = max(wdLen, n.Out*n.in.C*n.Kernel*n.Kernel)
		}
	}
	if wdLen > 0 {
		m.cv.wdirect = a.alloc("direct convolution weights", wdLen)
	}
}

// keepColsFloats bounds the columns a Model keeps from the forward pass
// for the backward pass (256 MiB: LeNet-5 at batch 64 keeps 2.2 million
// floats, ResNet-20 at batch 64 58 million — 17% faster steps than running
// Im2col again — and at batch 128 recomputes them).
const keepColsFloats = 64 << 20

// colsOf is the buffer the chunk of k samples from s0 of conv node i
// writes its columns to: its part of the kept columns (the chunks lie
// back to back), or the shared scratch.
func (m *Model) colsOf(i, s0, k int, n node) kernels.Buffer {
	per := n.columns()
	if m.cv.kept[i] != nil {
		return m.B.View(m.cv.kept[i], s0*per, k*per)
	}
	return m.B.View(m.cv.cols, 0, k*per)
}

// placeConvs decides where each conv node runs: on the backend's library
// (m.cv.lib) as choice says, else on its direct convolution where it has the
// shape (directConvs), else on columns and GEMMs.
func (m *Model) placeConvs(b kernels.Backend, choice ConvChoice) {
	m.cv.whole, _ = kernels.WholeConvOf(b)
	m.cv.direct, m.cv.directFwd, m.cv.directDX = m.directConvs(b)
	m.cv.lib = make([]bool, len(m.nodes))
	conv := 0
	for i, n := range m.nodes {
		if n.Kind != KindConv {
			continue
		}
		m.cv.lib[i] = m.cv.whole != nil && (choice == nil || conv < len(choice) && choice[conv])
		if m.cv.lib[i] {
			m.cv.directFwd[i], m.cv.directDX[i] = false, false
		}
		conv++
	}
}

// directConvs decides which conv nodes run on b's direct convolution
// (kernels.DirectConvOps): stride-1 convolutions with kernels larger than
// 1×1 (a 1×1 one's Im2col is a copy, and its GEMM beats the direct
// kernels), their forward pass and weight gradient where the backend runs
// the shape, and their input gradient, the convolution of dY with the
// flipped kernels at padding k−1−pad, where it runs that one.
func (m *Model) directConvs(b kernels.Backend) (kernels.DirectConvOps, []bool, []bool) {
	fwd, dx := make([]bool, len(m.nodes)), make([]bool, len(m.nodes))
	d, ok := kernels.DirectConvOf(b)
	if !ok {
		return nil, fwd, dx
	}
	for i, n := range m.nodes {
		if n.Kind != KindConv || n.Stride != 1 || n.Kernel < 2 {
			continue
		}
		fwd[i] = d.ConvSupports(n.in.C, n.in.H, n.in.W, n.Out, n.Kernel, n.Pad)
		// The network's input (n.from < 0) takes no gradient.
		dx[i] = n.from >= 0 && d.ConvSupports(n.Out, n.out.H, n.out.W, n.in.C, n.Kernel, n.Kernel-1-n.Pad)
	}
	return d, fwd, dx
}

// antiIdentity is the n×n matrix with ones on its anti-diagonal: W·J
// reverses each row of W.
func antiIdentity(n int) []float32 {
	j := make([]float32, n*n)
	for i := range n {
		j[i*n+n-1-i] = 1
	}
	return j
}

// convForward is a convolution, in chunks of samples (node.chunk): the
// chunk's columns (Im2col, c·k·k × k·oh·ow), then Yᵀ = W·cols, out ×
// k·oh·ow, with the bias added as the rank-1 product bias·onesᵀ, and
// Transpose01 into the chunk's NCHW output.
func (m *Model) convForward(i int, n node, x, y kernels.Buffer) error {
	b, l := m.B, m.layers[n.param]
	if m.cv.lib[i] {
		var bias kernels.Buffer
		if l.HasBias() {
			bias = m.bias(m.Params, l)
		}
		return m.cv.whole.ConvForward(y, x, m.weight(m.Params, l), bias, m.rows, n.in.C, n.in.H, n.in.W, l.Out, n.Kernel, n.Stride, n.Pad)
	}
	if m.cv.directFwd[i] { // the whole batch at once, no columns
		kk := n.Kernel * n.Kernel
		wd := b.View(m.cv.wdirect, 0, l.Out*n.in.C*kk)
		if err := m.conv.Transpose01(wd, m.weight(m.Params, l), l.Out, n.in.C*kk, 1); err != nil {
			return err
		}
		var bias kernels.Buffer
		if l.HasBias() {
			bias = m.bias(m.Params, l)
		}
		return m.cv.direct.Conv(y, x, wd, bias, m.rows, n.in.C, n.in.H, n.in.W, l.Out, n.Kernel, n.Pad)
	}
	p, in, out := n.out.H*n.out.W, n.in.Size(), n.out.Size()
	cs := n.chunk(m.rows, m.cv.chunkFloats)
	for s0 := 0; s0 < m.rows; s0 += cs {
		k := min(cs, m.rows-s0)
		cols, yt := m.colsOf(i, s0, k, n), b.View(m.cv.convOut, 0, k*out)
		if err := m.conv.Im2col(cols, b.View(x, s0*in, k*in), k, n.in.C, n.in.H, n.in.W, n.Kernel, n.Stride, n.Pad); err != nil {
			return err
		}
		if err := b.Gemm(false, false, l.Out, k*p, l.In, 1, m.weight(m.Params, l), cols, 0, yt); err != nil {
			return err
		}
		if l.HasBias() {
			if err := b.Gemm(false, false, l.Out, k*p, 1, 1, m.bias(m.Params, l), b.View(m.cv.ones, 0, k*p), 1, yt); err != nil {
				return err
			}
		}
		if err := m.conv.Transpose01(b.View(y, s0*out, k*out), yt, l.Out, k, p); err != nil {
			return err
		}
	}
	return nil
}

// convBackward is a convolution's gradients, in the forward pass's
// chunks: the chunk's dY in the GEMM's layout (Transpose01, out ×
// k·oh·ow), dW += dYᵀ·colsᵀ and db += dYᵀ·ones over the chunks, and, when
// dx is wanted, the columns' gradient Wᵀ·dYᵀ scattered back into the
// chunk's dx (Col2im) — or, for a "same" convolution with as many outputs
// as inputs (node.flipped: ResNet's 3×3 layers), dx as the convolution
// of dY with the flipped, transposed kernels (Im2col of dY at padding
// k−1−pad, a GEMM as wide as the forward pass's, Transpose01): Im2col
// runs 1.7–3× faster than Col2im, and the GEMM has k·k·out rows of
// depth instead of out.
func (m *Model) convBackward(i int, n node, x, dy, dx kernels.Buffer) error {
	b, l := m.B, m.layers[n.param]
	p, in, out := n.out.H*n.out.W, n.in.Size(), n.out.Size()
	dw := m.weight(m.Grads, l)
	if m.cv.lib[i] { // the library's three products, the whole batch at once
		var db kernels.Buffer
		if l.HasBias() {
			db = m.bias(m.Grads, l)
		}
		if err := m.cv.whole.ConvBackwardFilter(dw, db, x, dy, m.rows, n.in.C, n.in.H, n.in.W, l.Out, n.Kernel, n.Stride, n.Pad); err != nil || dx == nil {
			return err
		}
		return m.cv.whole.ConvBackwardData(dx, dy, m.weight(m.Params, l), m.rows, n.in.C, n.in.H, n.in.W, l.Out, n.Kernel, n.Stride, n.Pad)
	}
	if m.rows == 0 {
		if err := b.Fill(m.B.View(m.Grads, l.WOff, l.End-l.WOff), 0); err != nil {
			return err
		}
	}
	wT, dx, err := m.flippedDX(i, n, dy, dx)
	if err != nil {
		return err
	}
	// A direct forward pass has a direct weight gradient, for the whole
	// batch; the chunks then only make dx, if it is still wanted.
	wDone := m.cv.directFwd[i]
	if wDone {
		var db kernels.Buffer
		if l.HasBias() {
			db = m.bias(m.Grads, l)
		}
		if err := m.cv.direct.ConvFilter(dw, db, x, dy, m.rows, n.in.C, n.in.H, n.in.W, l.Out, n.Kernel, n.Pad); err != nil {
			return err
		}
		if dx == nil {
			return nil
		}
	}
	cs := n.chunk(m.rows, m.cv.chunkFloats)
	for s0 := 0; s0 < m.rows; s0 += cs {
		k := min(cs, m.rows-s0)
		beta := float32(1)
		if s0 == 0 {
			beta = 0
		}
		cols, dyt := m.colsOf(i, s0, k, n), b.View(m.cv.convOut, 0, k*out)
		dys := b.View(dy, s0*out, k*out)
		if err := m.conv.Transpose01(dyt, dys, k, l.Out, p); err != nil {
			return err
		}
		if m.cv.kept[i] == nil && !wDone {
			if err := m.conv.Im2col(cols, b.View(x, s0*in, k*in), k, n.in.C, n.in.H, n.in.W, n.Kernel, n.Stride, n.Pad); err != nil {
				return err
			}
		}
		if !wDone {
			if err := b.Gemm(false, true, l.Out, l.In, k*p, 1, dyt, cols, beta, dw); err != nil {
				return err
			}
			if l.HasBias() {
				if err := b.Gemm(false, false, l.Out, 1, k*p, 1, dyt, b.View(m.cv.ones, 0, k*p), beta, m.bias(m.Grads, l)); err != nil {
					return err
				}
			}
		}
		if dx == nil {
			continue
		}
		if err := m.chunkDX(n, wT, cols, dyt, dys, b.View(dx, s0*in, k*in), k); err != nil {
			return err
		}
	}
	return nil
}

// flippedDX prepares the input gradient of node i's convolution where it
// runs as the convolution of dY with the flipped, transposed kernels
// (flip: ResNet's "same" 3×3 layers, or a direct one): it returns those
// kernels, wT, for the chunks (nil: Col2im makes dx), and dx, nil where
// the direct convolution has made it already for the whole batch.
func (m *Model) flippedDX(i int, n node, dy, dx kernels.Buffer) (wT, dxLeft kernels.Buffer, err error) {
	if dx == nil || !n.flipped() && !m.cv.directDX[i] {
		return nil, dx, nil
	}
	b, l := m.B, m.layers[n.param]
	kk, wn := n.Kernel*n.Kernel, l.Out*n.in.C*n.Kernel*n.Kernel
	wf := b.View(m.cv.flip, 0, wn)
	wT = b.View(m.cv.flip, wn, wn)
	if err := b.Gemm(false, false, l.Out*n.in.C, kk, kk, 1, m.weight(m.Params, l), m.cv.anti[n.Kernel], 0, wf); err != nil {
		return nil, nil, err
	}
	if err := m.conv.Transpose01(wT, wf, l.Out, n.in.C, kk); err != nil {
		return nil, nil, err
	}
	if !m.cv.directDX[i] {
		return wT, dx, nil
	}
	// dx for the whole batch at once, on the direct convolution.
	if err := m.conv.Transpose01(wf, wT, n.in.C, l.Out*kk, 1); err != nil {
		return nil, nil, err
	}
	return nil, nil, m.cv.direct.Conv(dx, dy, wf, nil, m.rows, l.Out, n.out.H, n.out.W, n.in.C, n.Kernel, n.Kernel-1-n.Pad)
}

// chunkDX makes a chunk of k samples' input gradient dx from its dY
// (dys, and dyt in the GEMM's layout): with the flipped kernels wT, dY's
// columns (out·k·k × k·h·w, as many as x's) and dxᵀ (in × k·h·w) reuse
// cols and dyt; without, the columns' gradient Wᵀ·dYᵀ scattered back by
// Col2im.
func (m *Model) chunkDX(n node, wT, cols, dyt, dys, dx kernels.Buffer, k int) error {
	b, l, p := m.B, m.layers[n.param], n.out.H*n.out.W
	if wT != nil {
		if err := m.conv.Im2col(cols, dys, k, l.Out, n.out.H, n.out.W, n.Kernel, 1, n.Kernel-1-n.Pad); err != nil {
			return err
		}
		if err := b.Gemm(false, false, n.in.C, k*p, l.Out*n.Kernel*n.Kernel, 1, wT, cols, 0, dyt); err != nil {
			return err
		}
		return m.conv.Transpose01(dx, dyt, n.in.C, k, p)
	}
	if err := b.Gemm(true, false, l.In, k*p, l.Out, 1, m.weight(m.Params, l), dyt, 0, cols); err != nil {
		return err
	}
	return m.conv.Col2im(dx, cols, k, n.in.C, n.in.H, n.in.W, n.Kernel, n.Stride, n.Pad)
}
