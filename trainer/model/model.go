package model

import (
	"errors"
	"fmt"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/trace"
)

// GradStats is the number of slots after the gradient in Model.Grads: the
// loss op writes a batch's summed loss and correct count there, so that one
// AllReduce carries the gradient and the batch statistics together.
const GradStats = 2

// GradHook is told, during the backward pass, that layer's gradient is
// complete: Grads[lo:hi] holds layer's weight and bias gradient, and
// everything from lo to the end of Grads (the later layers and the
// GradStats slots) is final. It is called once per layer, last layer first,
// so the final part grows as a contiguous suffix. On a device backend
// "final" means "queued": a consumer on the host must Download (which
// waits) before reading. An error from the hook stops the backward pass.
type GradHook func(layer, lo, hi int) error

// Model runs an Arch's forward and backward passes on a Backend for
// mini-batches of up to MaxRows rows. Params is the flat parameter vector in
// the Layers layout; Grads is the gradient in the same layout followed by
// GradStats slots, what the ranks reduce, in one piece.
//
// A batch goes in with LoadBatch (or Upload): its features and labels travel
// to the backend in one Upload, into one buffer (features, then labels as
// float32 class indices).
type Model struct {
	Arch    Arch
	B       kernels.Backend
	MaxRows int
	Params  kernels.Buffer
	Grads   kernels.Buffer
	// Augment, if not nil, transforms a training batch on the host after
	// LoadBatch gathered it (rows of x, the samples idx of the set), before
	// it is uploaded; evaluation (Score) never calls it.
	Augment func(x []float32, idx []int)
	// Tracer receives "forward" and "backward" spans (trace.Nop from New),
	// and for a network (Arch.Net) one span per layer inside them, named
	// by the layer ("conv1", "relu", "maxpool"; "conv1 backward" in the
	// backward pass).
	Tracer trace.Tracer

	nodes  []node
	layers []Layer // the layers with parameters, in Arch.Layers' order
	np     int
	batch  kernels.Buffer   // MaxRows×(inputs+1): features, then labels
	acts   []kernels.Buffer // acts[i] is node i's output (a ReLU's or a flatten's is its input's buffer)
	dacts  []kernels.Buffer // the gradient w.r.t. acts[i] (nil for node 0's input)
	owned  []kernels.Buffer // everything Alloc returned, for Free
	rows   int              // rows of the batch loaded

	// Convolutional networks: the backend's ConvOps, one chunk's columns
	// (the largest c·k·k × chunk·oh·ow of any conv layer; none when they
	// are kept), one chunk's output (or output gradient) in the GEMM's
	// layout, out × chunk·oh·ow, and ones (chunk·oh·ow) for the bias as a
	// rank-1 GEMM (Arch.convScratch).
	conv        kernels.ConvOps
	chunkFloats int // chunkFloats(B)
	// flip: for the conv layers whose input gradient runs as a convolution
	// of dY (node.flipped, or directDX), the weights flipped and transposed
	// (two buffers of the largest out·in·k·k), and anti[k], the k²×k²
	// anti-identity that flips a k×k kernel as a GEMM.
	flip kernels.Buffer
	anti map[int]kernels.Buffer
	// direct: the backend's direct stride-1 convolution, when it has one;
	// directFwd[i], directDX[i]: conv node i's forward pass and weight
	// gradient, and its input gradient, run on it (directConvs); wdirect
	// holds the weights in its layout.
	direct              kernels.DirectConvOps
	directFwd, directDX []bool
	wdirect             kernels.Buffer
	cols                kernels.Buffer
	convOut             kernels.Buffer
	ones                kernels.Buffer
	// whole: the backend's library-served convolutions (cuDNN, oneDNN),
	// when they run; lib[i], conv node i runs on them (every one, but
	// where a ConvChoice said otherwise), with no columns, no chunks and
	// no flipped weights.
	whole kernels.WholeConvOps
	lib   []bool
	// Batch norm: State holds every batch norm's running statistics
	// (Arch.StateTensors; Upload Arch.InitState to start), stats[i] node
	// i's batch mean and inverse deviation of the last training forward
	// pass, one a single 1 (the batch count's increment).
	State kernels.Buffer
	stats []kernels.Buffer
	one   kernels.Buffer
	norm  kernels.NormOps
	// normRelu, where the backend fuses a batch norm with its ReLU
	// (kernels.NormReluOf), runs the batch norms fused[i] marks: those
	// whose output only a ReLU in place reads. In training that ReLU is
	// then done by its batch norm, both ways.
	normRelu kernels.NormReluOps
	fused    []bool
	// training: Forward normalises with the batch's statistics (Step);
	// otherwise with the running ones (Predict, Score).
	training bool
	// scratch holds a gradient to be added to one that a node's output
	// already received (a block's input is read twice).
	scratch kernels.Buffer
	have    []bool // backward: node i's output gradient has a first part
	// kept[i], for conv node i when every conv layer's columns for a whole
	// batch fit keepColsFloats: the forward pass's columns of each chunk
	// of samples, back to back, which the backward pass reuses instead of
	// running Im2col again.
	kept []kernels.Buffer

	// UseGraph makes Step, where the backend records graphs
	// (kernels.GraphOf) and no hook is given, replay one recording of
	// the step per batch shape: the first step of a shape runs op by op
	// (planning the libraries' algorithms, filling the memory pool), the
	// second is recorded, and each from then on is one launch. The bits
	// are those of the op-by-op step: the same kernels on the same
	// buffers.
	UseGraph bool
	graphs   map[graphKey]kernels.Graph
	seen     map[graphKey]bool

	// host staging for LoadBatch (pinned memory from the backend's
	// HostAlloc when it has one: the batch is gathered straight into what
	// the device copies from), and evaluation's buffers (reused).
	hostX     []float32
	pinnedX   bool
	hostY     []int32
	evalGrad  kernels.Buffer
	evalStats kernels.Buffer
	statsHost []float32
}

// New allocates a model's buffers on b (parameters zero: Upload them),
// its convolutions on the backend's library wherever it has one
// (kernels.WholeConvOf). Free releases them.
func New(arch Arch, b kernels.Backend, maxRows int) (*Model, error) {
	return NewChosen(arch, b, maxRows, nil)
}

// ConvChoice says, for each convolution layer in the network's order,
// whether the backend's library runs it (true) or dml's own kernels do;
// nil: the library, for all, where there is one. ChooseConvs makes one.
type ConvChoice []bool

// NewChosen is New with the convolutions on the library or not as choice
// says (a choice for a backend without a library is ignored: its own
// kernels run every one).
func NewChosen(arch Arch, b kernels.Backend, maxRows int, choice ConvChoice) (*Model, error) {
	if maxRows < 1 {
		return nil, fmt.Errorf("model: %d rows per batch: need at least 1", maxRows)
	}
	m := &Model{Arch: arch, B: b, MaxRows: maxRows, Tracer: trace.Nop, nodes: arch.mustNodes(), layers: arch.Layers(), np: arch.NumParams(), chunkFloats: chunkFloats(b)}
	if err := m.findOps(); err != nil {
		return nil, err
	}
	a := &allocator{m: m}
	m.Params = a.alloc("parameters", m.np)
	m.Grads = a.alloc("gradient", m.np+GradStats)
	m.batch = a.alloc("batch", maxRows*(arch.Sizes[0]+1))
	m.nodeBuffers(a)
	if arch.hasForks() {
		m.scratch = a.alloc("gradient scratch", maxRows*arch.largestOutput())
	}
	if ns := arch.NumState(); ns > 0 {
		m.State = a.alloc("batch-norm running statistics", ns)
		m.one = a.alloc("one", 1)
		a.then(func() error { return b.Fill(m.one, 1) })
		a.then(func() error { return b.Upload(m.State, arch.InitState()) })
	}
	m.placeConvs(b, choice)
	m.convBuffers(a)
	m.evalGrad = a.alloc("evaluation scratch", maxRows*arch.Sizes[len(arch.Sizes)-1])
	m.evalStats = a.alloc("evaluation statistics", GradStats)
	if a.failed != nil {
		return nil, errors.Join(a.failed, m.Free())
	}
	if err := m.hostBuffers(); err != nil {
		return nil, errors.Join(err, m.Free())
	}
	return m, nil
}

// findOps finds the optional op sets the model's layers need on its
// backend (an error where one is missing), and the batch norms it runs
// fused with their ReLU where the backend fuses them.
func (m *Model) findOps() error {
	b, arch := m.B, m.Arch
	for _, n := range m.nodes {
		if n.Kind == KindConv || n.Kind == KindMaxPool || n.Kind == KindAvgPool {
			if m.conv == nil {
				var ok bool
				if m.conv, ok = kernels.ConvOf(b); !ok {
					return fmt.Errorf("model %s: %s layers need convolution ops, which backend %s lacks: %w", arch.Describe(), n.Kind, b.Name(), kernels.ErrNoConv)
				}
			}
		}
		if n.Kind == KindBatchNorm && m.norm == nil {
			var ok bool
			if m.norm, ok = kernels.NormOf(b); !ok {
				return fmt.Errorf("model %s: batch norm needs normalisation ops, which backend %s lacks: %w", arch.Describe(), b.Name(), kernels.ErrNoConv)
			}
		}
	}
	if nr, ok := kernels.NormReluOf(b); ok {
		inp := inPlace(m.nodes)
		m.normRelu, m.fused = nr, make([]bool, len(m.nodes))
		for i, n := range m.nodes {
			if n.Kind == KindReLU && inp[i] && m.nodes[n.from].Kind == KindBatchNorm {
				m.fused[n.from] = true
			}
		}
	}
	return nil
}

// allocator allocates a model's buffers on its backend, each owned by the
// model, keeping the first error and doing nothing after it.
type allocator struct {
	m      *Model
	failed error
}

// alloc returns a zeroed buffer of n floats for what (nil after an
// error).
func (a *allocator) alloc(what string, n int) kernels.Buffer {
	if a.failed != nil {
		return nil
	}
	buf, err := a.m.B.Alloc(n)
	if err != nil {
		a.failed = fmt.Errorf("model %s: allocating the %s (%d floats): %w", a.m.Arch.Describe(), what, n, err)
		return nil
	}
	a.m.owned = append(a.m.owned, buf)
	return buf
}

// then runs f (filling a buffer) unless an error came before.
func (a *allocator) then(f func() error) {
	if a.failed == nil {
		a.failed = f()
	}
}

// nodeBuffers allocates each node's output and output gradient (shared
// with its input's where it works in place: a ReLU, a flatten, a residual
// add, as inPlace says) and a batch norm's statistics.
func (m *Model) nodeBuffers(a *allocator) {
	maxRows := m.MaxRows
	m.stats = make([]kernels.Buffer, len(m.nodes))
	for i, in := range inPlace(m.nodes) {
		n := m.nodes[i]
		name := n.Name
		if name == "" {
			name = fmt.Sprintf("layer %d (%s)", i, n.Kind)
		}
		if n.Kind == KindBatchNorm {
			m.stats[i] = a.alloc(name+" batch statistics", 2*n.Out)
		}
		if in {
			m.acts = append(m.acts, m.acts[n.from])
			m.dacts = append(m.dacts, m.dacts[n.from])
			continue
		}
		m.acts = append(m.acts, a.alloc(name+" output", maxRows*n.out.Size()))
		m.dacts = append(m.dacts, a.alloc(name+" output gradient", maxRows*n.out.Size()))
	}
	m.have = make([]bool, len(m.nodes))
}

// convBuffers allocates what the convolutions placed (placeConvs) need
// beside their outputs: columns kept or chunked, the GEMM layout's
// output, ones, the kernel flips and flipped weights, the direct
// kernels' weights.
func (m *Model) convBuffers(a *allocator) {
	b, arch, maxRows := m.B, m.Arch, m.MaxRows
	m.kept = make([]kernels.Buffer, len(m.nodes))
	// The chunks of samples (and their scratch) serve every convolution
	// but a direct one whose input gradient is direct too or not wanted;
	// a direct convolution keeps no columns (its weight gradient needs
	// none; an input gradient by Col2im uses the scratch).
	chunked, unkept, keep := false, false, arch.KeptColumns(maxRows) > 0
	for i, n := range m.nodes {
		if n.Kind != KindConv || m.lib[i] || m.directFwd[i] && (n.from < 0 || m.directDX[i]) {
			continue
		}
		chunked = true
		if keep && !m.directFwd[i] {
			m.kept[i] = a.alloc(n.Name+" columns", n.columns()*maxRows)
		} else {
			unkept = true
		}
	}
	if colsLen, outLen, onesLen := arch.convScratch(maxRows, m.chunkFloats); chunked && colsLen > 0 {
		if unkept {
			m.cols = a.alloc("convolution columns", colsLen)
		}
		m.convOut = a.alloc("convolution output (GEMM layout)", outLen)
		m.ones = a.alloc("ones", onesLen)
		a.then(func() error { return b.Fill(m.ones, 1) })
	}
	m.anti = map[int]kernels.Buffer{}
	flipLen, wdLen := 0, 0
	for i, n := range m.nodes {
		if m.lib[i] || !n.flipped() && !m.directDX[i] {
			continue
		}
		kk := n.Kernel * n.Kernel
		flipLen = max(flipLen, 2*n.Out*n.in.C*kk)
		if m.anti[n.Kernel] == nil {
			j := a.alloc(fmt.Sprintf("%d×%d kernel flip", n.Kernel, n.Kernel), kk*kk)
			m.anti[n.Kernel] = j
			a.then(func() error { return b.Upload(j, antiIdentity(kk)) })
		}
	}
	if flipLen > 0 {
		m.flip = a.alloc("flipped convolution weights", flipLen)
	}
	for i, n := range m.nodes {
		if m.directFwd[i] {
			wdLen = max(wdLen, n.Out*n.in.C*n.Kernel*n.Kernel)
		}
	}
	if wdLen > 0 {
		m.wdirect = a.alloc("direct convolution weights", wdLen)
	}
}

// hostBuffers makes the host side: the batch's staging (pinned where the
// backend has host allocations) and the labels' and statistics' copies.
func (m *Model) hostBuffers() error {
	nx := m.MaxRows * (m.Arch.Sizes[0] + 1)
	if ha, ok := m.B.(kernels.HostAllocator); ok {
		x, err := ha.HostAlloc(nx)
		if err != nil {
			return fmt.Errorf("model %v: allocating the batch's pinned host staging (%d floats): %w", m.Arch.Sizes, nx, err)
		}
		m.hostX, m.pinnedX = x, true
	} else {
		m.hostX = make([]float32, nx)
	}
	m.hostY = make([]int32, m.MaxRows)
	m.statsHost = make([]float32, GradStats)
	return nil
}

// graphKey is what a recorded step depends on besides the model's own
// buffers: the rows of the batch and the gradient's scale (kernel
// arguments, fixed in the recording).
type graphKey struct {
	rows  int
	scale float32
}

// maxGraphs bounds the recordings kept (a full batch and an epoch's last,
// shorter one, at a scale or two).
const maxGraphs = 4

// Free releases the model's buffers; the model must not be used afterwards.
func (m *Model) Free() error {
	var errs []error
	for k, g := range m.graphs {
		errs = append(errs, g.Free())
		delete(m.graphs, k)
	}
	for _, b := range m.owned {
		errs = append(errs, m.B.Free(b))
	}
	m.owned = nil
	if m.pinnedX {
		errs = append(errs, m.B.(kernels.HostAllocator).HostFree(m.hostX))
		m.hostX, m.pinnedX = nil, false
	}
	return errors.Join(errs...)
}

// NumParams is the length of Params (Grads has GradStats more).
func (m *Model) NumParams() int { return m.np }

// GradView is the gradient part of Grads (without the GradStats slots).
func (m *Model) GradView() kernels.Buffer { return m.B.View(m.Grads, 0, m.np) }

// Stats is the GradStats slots of Grads: the last batch's summed loss and
// correct count, as the loss op wrote them (before any reduction).
func (m *Model) Stats() kernels.Buffer { return m.B.View(m.Grads, m.np, GradStats) }

// Upload puts a batch on the backend: x holds rows × inputs features, y
// the rows labels as float32 class indices, and y must directly follow x
// in one slice (x = hv[:rows*inputs], y = hv[rows*inputs:]) so that the
// batch travels in one Upload. hv is rows×(inputs+1) long.
func (m *Model) Upload(hv []float32, rows int) error {
	in := m.Arch.Sizes[0]
	if rows < 0 || rows > m.MaxRows || len(hv) != rows*(in+1) {
		return fmt.Errorf("model: batch of %d floats for %d rows of %d features: want %d rows at most and rows×(features+1) floats: %w",
			len(hv), rows, in, m.MaxRows, kernels.ErrShape)
	}
	if err := m.B.Upload(m.B.View(m.batch, 0, len(hv)), hv); err != nil {
		return fmt.Errorf("uploading a batch of %d rows: %w", rows, err)
	}
	m.rows = rows
	return nil
}

// LoadBatch gathers rows idx of set (features and labels) into the host
// staging buffer and uploads them in one piece. It returns the rows loaded.
func (m *Model) LoadBatch(set *data.Dense, idx []int) (int, error) {
	return m.loadBatch(set, idx, m.Augment)
}

func (m *Model) loadBatch(set *data.Dense, idx []int, augment func([]float32, []int)) (int, error) {
	rows, in := len(idx), m.Arch.Sizes[0]
	if rows > m.MaxRows {
		return 0, fmt.Errorf("model: batch of %d rows, room for %d: %w", rows, m.MaxRows, kernels.ErrShape)
	}
	hv := m.hostX[:rows*(in+1)]
	ys := m.hostY[:rows]
	if err := set.Gather(hv[:rows*in], ys, idx); err != nil {
		return 0, err
	}
	for i, y := range ys {
		hv[rows*in+i] = float32(y)
	}
	if augment != nil {
		augment(hv[:rows*in], idx)
	}
	return rows, m.Upload(hv, rows)
}

func (m *Model) view(buf kernels.Buffer, rows, cols int) kernels.Buffer {
	return m.B.View(buf, 0, rows*cols)
}

func (m *Model) labels(rows int) kernels.Buffer {
	return m.B.View(m.batch, rows*m.Arch.Sizes[0], rows)
}

func (m *Model) weight(buf kernels.Buffer, l Layer) kernels.Buffer {
	return m.B.View(buf, l.WOff, l.BOff-l.WOff)
}

func (m *Model) bias(buf kernels.Buffer, l Layer) kernels.Buffer {
	return m.B.View(buf, l.BOff, l.Out)
}

// input is node i's input for the batch: the features, or its from
// node's output.
func (m *Model) input(i int) kernels.Buffer { return m.output(m.nodes[i].from) }

// output is node j's output for the batch (j = -1: the features).
func (m *Model) output(j int) kernels.Buffer {
	if j < 0 {
		return m.view(m.batch, m.rows, m.Arch.Sizes[0])
	}
	return m.view(m.acts[j], m.rows, m.nodes[j].out.Size())
}

// give hands node j its output gradient's part that write computes
// (overwriting its destination): into the gradient itself when it is the
// first part, else into scratch, added on (a block's input is read by its
// path and by its shortcut). Node -1, the batch, takes none.
func (m *Model) give(j int, write func(dst kernels.Buffer) error) error {
	if j < 0 {
		return nil
	}
	dst := m.view(m.dacts[j], m.rows, m.nodes[j].out.Size())
	if !m.have[j] {
		m.have[j] = true
		return write(dst)
	}
	tmp := m.view(m.scratch, m.rows, m.nodes[j].out.Size())
	if err := write(tmp); err != nil {
		return err
	}
	return m.B.Axpy(1, tmp, dst)
}

// batchNorm runs node i's batch norm forward.
func (m *Model) batchNorm(i int, n node, x, y kernels.Buffer) error {
	l, c := m.layers[n.param], n.Out
	g, be := m.weight(m.Params, l), m.bias(m.Params, l)
	rm, rv := m.B.View(m.State, n.state, c), m.B.View(m.State, n.state+c, c)
	if !m.training {
		return m.norm.BatchNormInfer(y, x, rm, rv, g, be, m.rows, c, n.in.H*n.in.W, BatchNormEps)
	}
	mean, inv := m.B.View(m.stats[i], 0, c), m.B.View(m.stats[i], c, c)
	train := m.norm.BatchNormTrain
	if m.fusedNorm(i) {
		train = m.normRelu.BatchNormReluTrain
	}
	if err := train(y, mean, inv, rm, rv, x, g, be, m.rows, c, n.in.H*n.in.W, BatchNormEps, BatchNormMomentum); err != nil {
		return err
	}
	return m.B.Axpy(1, m.one, m.B.View(m.State, n.state+2*c, 1)) // num_batches_tracked
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
	if m.kept[i] != nil {
		return m.B.View(m.kept[i], s0*per, k*per)
	}
	return m.B.View(m.cols, 0, k*per)
}

// placeConvs decides where each conv node runs: on the backend's library
// (m.lib) as choice says, else on its direct convolution where it has the
// shape (directConvs), else on columns and GEMMs.
func (m *Model) placeConvs(b kernels.Backend, choice ConvChoice) {
	m.whole, _ = kernels.WholeConvOf(b)
	m.direct, m.directFwd, m.directDX = m.directConvs(b)
	m.lib = make([]bool, len(m.nodes))
	conv := 0
	for i, n := range m.nodes {
		if n.Kind != KindConv {
			continue
		}
		m.lib[i] = m.whole != nil && (choice == nil || conv < len(choice) && choice[conv])
		if m.lib[i] {
			m.directFwd[i], m.directDX[i] = false, false
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

// Forward runs the batch last uploaded through the layers and returns the
// logits (rows × outputs).
func (m *Model) Forward() (kernels.Buffer, error) {
	b, rows := m.B, m.rows
	for i, n := range m.nodes {
		x, y := m.input(i), m.view(m.acts[i], rows, n.out.Size())
		sp := m.layerSpan(n, "")
		var err error
		switch n.Kind {
		case KindLinear:
			l := m.layers[n.param]
			err = b.Gemm(false, true, rows, l.Out, l.In, 1, x, m.weight(m.Params, l), 0, y)
			if err == nil && l.HasBias() {
				err = b.AddBias(y, m.bias(m.Params, l), rows, l.Out)
			}
		case KindConv:
			err = m.convForward(i, n, x, y)
		case KindReLU:
			if !m.training || !m.fusedNorm(n.from) {
				err = b.Relu(y, x)
			}
		case KindMaxPool:
			err = m.conv.MaxPool(y, x, rows*n.in.C, n.in.H, n.in.W, n.Kernel, n.Stride)
		case KindAvgPool:
			err = m.conv.AvgPool(y, x, rows*n.in.C, n.in.H, n.in.W, n.Kernel, n.Stride)
		case KindBatchNorm:
			err = m.batchNorm(i, n, x, y)
		case kindAdd:
			err = b.Sum(y, x, m.output(n.plus))
		case KindFlatten:
			if !m.sameBuffer(i) {
				err = b.Copy(y, x)
			}
		}
		sp.Err(err).End()
		if err != nil {
			return nil, fmt.Errorf("%s forward: %w", n.label(i), err)
		}
	}
	return m.view(m.acts[len(m.nodes)-1], rows, m.outputs()), nil
}

// convForward is a convolution, in chunks of samples (node.chunk): the
// chunk's columns (Im2col, c·k·k × k·oh·ow), then Yᵀ = W·cols, out ×
// k·oh·ow, with the bias added as the rank-1 product bias·onesᵀ, and
// Transpose01 into the chunk's NCHW output.
func (m *Model) convForward(i int, n node, x, y kernels.Buffer) error {
	b, l := m.B, m.layers[n.param]
	if m.lib[i] {
		var bias kernels.Buffer
		if l.HasBias() {
			bias = m.bias(m.Params, l)
		}
		return m.whole.ConvForward(y, x, m.weight(m.Params, l), bias, m.rows, n.in.C, n.in.H, n.in.W, l.Out, n.Kernel, n.Stride, n.Pad)
	}
	if m.directFwd[i] { // the whole batch at once, no columns
		kk := n.Kernel * n.Kernel
		wd := b.View(m.wdirect, 0, l.Out*n.in.C*kk)
		if err := m.conv.Transpose01(wd, m.weight(m.Params, l), l.Out, n.in.C*kk, 1); err != nil {
			return err
		}
		var bias kernels.Buffer
		if l.HasBias() {
			bias = m.bias(m.Params, l)
		}
		return m.direct.Conv(y, x, wd, bias, m.rows, n.in.C, n.in.H, n.in.W, l.Out, n.Kernel, n.Pad)
	}
	p, in, out := n.out.H*n.out.W, n.in.Size(), n.out.Size()
	cs := n.chunk(m.rows, m.chunkFloats)
	for s0 := 0; s0 < m.rows; s0 += cs {
		k := min(cs, m.rows-s0)
		cols, yt := m.colsOf(i, s0, k, n), b.View(m.convOut, 0, k*out)
		if err := m.conv.Im2col(cols, b.View(x, s0*in, k*in), k, n.in.C, n.in.H, n.in.W, n.Kernel, n.Stride, n.Pad); err != nil {
			return err
		}
		if err := b.Gemm(false, false, l.Out, k*p, l.In, 1, m.weight(m.Params, l), cols, 0, yt); err != nil {
			return err
		}
		if l.HasBias() {
			if err := b.Gemm(false, false, l.Out, k*p, 1, 1, m.bias(m.Params, l), b.View(m.ones, 0, k*p), 1, yt); err != nil {
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
	if m.lib[i] { // the library's three products, the whole batch at once
		var db kernels.Buffer
		if l.HasBias() {
			db = m.bias(m.Grads, l)
		}
		if err := m.whole.ConvBackwardFilter(dw, db, x, dy, m.rows, n.in.C, n.in.H, n.in.W, l.Out, n.Kernel, n.Stride, n.Pad); err != nil || dx == nil {
			return err
		}
		return m.whole.ConvBackwardData(dx, dy, m.weight(m.Params, l), m.rows, n.in.C, n.in.H, n.in.W, l.Out, n.Kernel, n.Stride, n.Pad)
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
	wDone := m.directFwd[i]
	if wDone {
		var db kernels.Buffer
		if l.HasBias() {
			db = m.bias(m.Grads, l)
		}
		if err := m.direct.ConvFilter(dw, db, x, dy, m.rows, n.in.C, n.in.H, n.in.W, l.Out, n.Kernel, n.Pad); err != nil {
			return err
		}
		if dx == nil {
			return nil
		}
	}
	cs := n.chunk(m.rows, m.chunkFloats)
	for s0 := 0; s0 < m.rows; s0 += cs {
		k := min(cs, m.rows-s0)
		beta := float32(1)
		if s0 == 0 {
			beta = 0
		}
		cols, dyt := m.colsOf(i, s0, k, n), b.View(m.convOut, 0, k*out)
		dys := b.View(dy, s0*out, k*out)
		if err := m.conv.Transpose01(dyt, dys, k, l.Out, p); err != nil {
			return err
		}
		if m.kept[i] == nil && !wDone {
			if err := m.conv.Im2col(cols, b.View(x, s0*in, k*in), k, n.in.C, n.in.H, n.in.W, n.Kernel, n.Stride, n.Pad); err != nil {
				return err
			}
		}
		if !wDone {
			if err := b.Gemm(false, true, l.Out, l.In, k*p, 1, dyt, cols, beta, dw); err != nil {
				return err
			}
			if l.HasBias() {
				if err := b.Gemm(false, false, l.Out, 1, k*p, 1, dyt, b.View(m.ones, 0, k*p), beta, m.bias(m.Grads, l)); err != nil {
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
	if dx == nil || !n.flipped() && !m.directDX[i] {
		return nil, dx, nil
	}
	b, l := m.B, m.layers[n.param]
	kk, wn := n.Kernel*n.Kernel, l.Out*n.in.C*n.Kernel*n.Kernel
	wf := b.View(m.flip, 0, wn)
	wT = b.View(m.flip, wn, wn)
	if err := b.Gemm(false, false, l.Out*n.in.C, kk, kk, 1, m.weight(m.Params, l), m.anti[n.Kernel], 0, wf); err != nil {
		return nil, nil, err
	}
	if err := m.conv.Transpose01(wT, wf, l.Out, n.in.C, kk); err != nil {
		return nil, nil, err
	}
	if !m.directDX[i] {
		return wT, dx, nil
	}
	// dx for the whole batch at once, on the direct convolution.
	if err := m.conv.Transpose01(wf, wT, n.in.C, l.Out*kk, 1); err != nil {
		return nil, nil, err
	}
	return nil, nil, m.direct.Conv(dx, dy, wf, nil, m.rows, l.Out, n.out.H, n.out.W, n.in.C, n.Kernel, n.Kernel-1-n.Pad)
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

func (m *Model) outputs() int { return m.Arch.Sizes[len(m.Arch.Sizes)-1] }

// loss runs the loss op on logits against the batch's labels, writing
// scale × its gradient into grad and the summed loss and correct count
// into stats.
func (m *Model) loss(grad, logits kernels.Buffer, scale float32, stats kernels.Buffer) error {
	rows := m.rows
	var err error
	switch m.Arch.Loss {
	case SoftmaxCE:
		err = m.B.SoftmaxCrossEntropy(grad, logits, m.labels(rows), rows, m.outputs(), scale, stats)
	case SigmoidCE:
		err = m.B.SigmoidCrossEntropy(grad, logits, m.labels(rows), rows, scale, stats)
	}
	if err != nil {
		return fmt.Errorf("loss: %w", err)
	}
	return nil
}

// Step runs forward and backward for the batch last uploaded: Grads
// receives scale × the gradient of the summed loss (pass 1/global batch
// size for the mean), and its GradStats slots the batch's summed loss and
// correct count. hook (may be nil) is told as each layer's gradient
// completes, last layer first. Nothing is read back to the host.
func (m *Model) Step(scale float32, hook GradHook) error {
	if m.UseGraph && hook == nil {
		if g, ok := kernels.GraphOf(m.B); ok {
			return m.graphStep(g, scale)
		}
	}
	return m.step(scale, hook)
}

// graphStep is Step replayed from a recording (UseGraph).
func (m *Model) graphStep(g kernels.GraphOps, scale float32) error {
	key := graphKey{m.rows, scale}
	if gr := m.graphs[key]; gr != nil {
		sp := m.Tracer.Begin("step graph").Cat(trace.Compute).Arg("rows", m.rows)
		err := gr.Launch()
		sp.Err(err).End()
		return err
	}
	if len(m.graphs) >= maxGraphs {
		if err := m.dropGraphs(scale); err != nil {
			return err
		}
	}
	if !m.seen[key] || len(m.graphs) >= maxGraphs {
		if m.seen == nil {
			m.seen = map[graphKey]bool{}
		}
		m.seen[key] = true
		return m.step(scale, nil)
	}
	sp := m.Tracer.Begin("step graph capture").Cat(trace.Compute).Arg("rows", m.rows)
	gr, err := g.Capture(func() error { return m.step(scale, nil) })
	if err == nil {
		if m.graphs == nil {
			m.graphs = map[graphKey]kernels.Graph{}
		}
		m.graphs[key] = gr
		err = gr.Launch()
	}
	sp.Err(err).End()
	return err
}

// dropGraphs frees the recordings made at a scale other than scale: a
// loss scale that changed (lossscale.go in package trainer) leaves them
// unused, and a full set would keep the new scale's step from being
// recorded.
func (m *Model) dropGraphs(scale float32) error {
	var errs []error
	for k, g := range m.graphs {
		if k.scale != scale {
			errs = append(errs, g.Free())
			delete(m.graphs, k)
			delete(m.seen, k)
		}
	}
	return errors.Join(errs...)
}

// step is Step op by op.
func (m *Model) step(scale float32, hook GradHook) error {
	sp := m.Tracer.Begin("forward").Cat(trace.Compute).Arg("rows", m.rows)
	m.training = true
	logits, err := m.Forward()
	m.training = false
	if err == nil {
		last := len(m.nodes) - 1
		dlogits := m.view(m.dacts[last], m.rows, m.outputs())
		err = m.loss(dlogits, logits, scale, m.Stats())
	}
	sp.Err(err).End()
	if err != nil {
		return err
	}
	sp = m.Tracer.Begin("backward").Cat(trace.Compute).Arg("rows", m.rows).Arg("layers", len(m.layers))
	err = m.backward(hook)
	sp.Err(err).End()
	return err
}

// backward runs the layers' backward passes, last first. Node 0's input
// gradient is never needed (the batch is data).
func (m *Model) backward(hook GradHook) error {
	b, rows := m.B, m.rows
	clear(m.have)
	m.have[len(m.nodes)-1] = true // the loss wrote the logits' gradient
	for i := len(m.nodes) - 1; i >= 0; i-- {
		n := m.nodes[i]
		x, dy := m.input(i), m.view(m.dacts[i], rows, n.out.Size())
		sp := m.layerSpan(n, " backward")
		var err error
		switch n.Kind {
		case KindLinear:
			l := m.layers[n.param]
			err = b.Gemm(true, false, l.Out, l.In, rows, 1, dy, x, 0, m.weight(m.Grads, l))
			if err == nil && l.HasBias() {
				err = b.SumRows(m.bias(m.Grads, l), dy, rows, l.Out, 0)
			}
			if err == nil {
				err = m.hooked(hook, n, i)
			}
			if err == nil && n.from >= 0 {
				beta := float32(0)
				if m.have[n.from] {
					beta = 1 // add to the part already there
				}
				m.have[n.from] = true
				err = b.Gemm(false, false, rows, l.In, l.Out, 1, dy, m.weight(m.Params, l), beta, m.view(m.dacts[n.from], rows, l.In))
			}
		case KindConv:
			if n.from < 0 {
				err = m.convBackward(i, n, x, dy, nil)
			} else {
				err = m.give(n.from, func(dst kernels.Buffer) error { return m.convBackward(i, n, x, dy, dst) })
			}
			if err == nil {
				err = m.hooked(hook, n, i)
			}
		case KindBatchNorm:
			l, c := m.layers[n.param], n.Out
			mean, inv := b.View(m.stats[i], 0, c), b.View(m.stats[i], c, c)
			dg, db := m.weight(m.Grads, l), m.bias(m.Grads, l)
			if n.from < 0 {
				err = fmt.Errorf("a batch norm on the input needs its input gradient's buffer")
			} else {
				err = m.give(n.from, func(dst kernels.Buffer) error {
					if m.fusedNorm(i) { // dy is the ReLU's output gradient
						y := m.view(m.acts[i], rows, n.out.Size())
						return m.normRelu.BatchNormReluGrad(dst, dg, db, dy, y, x, mean, inv, m.weight(m.Params, l), rows, c, n.in.H*n.in.W)
					}
					return m.norm.BatchNormGrad(dst, dg, db, dy, x, mean, inv, m.weight(m.Params, l), rows, c, n.in.H*n.in.W)
				})
			}
			if err == nil {
				err = m.hooked(hook, n, i)
			}
		case KindReLU:
			if m.fusedNorm(n.from) {
				m.have[n.from] = true // in place: its batch norm's backward applies it
				break
			}
			y := m.view(m.acts[i], rows, n.out.Size())
			err = m.give(n.from, func(dst kernels.Buffer) error { return b.ReluGrad(dst, dy, y) })
		case KindMaxPool:
			err = m.give(n.from, func(dst kernels.Buffer) error {
				return m.conv.MaxPoolGrad(dst, dy, x, rows*n.in.C, n.in.H, n.in.W, n.Kernel, n.Stride)
			})
		case KindAvgPool:
			err = m.give(n.from, func(dst kernels.Buffer) error {
				return m.conv.AvgPoolGrad(dst, dy, rows*n.in.C, n.in.H, n.in.W, n.Kernel, n.Stride)
			})
		case kindAdd:
			// In place (inPlace), the first input's gradient is dy's
			// buffer already.
			if m.sameBuffer(i) {
				m.have[n.from] = true
			} else {
				err = m.give(n.from, func(dst kernels.Buffer) error { return b.Copy(dst, dy) })
			}
			if err == nil {
				err = m.give(n.plus, func(dst kernels.Buffer) error { return b.Copy(dst, dy) })
			}
		case KindFlatten:
			if m.sameBuffer(i) {
				m.have[n.from] = true
			} else {
				err = m.give(n.from, func(dst kernels.Buffer) error { return b.Copy(dst, dy) })
			}
		}
		sp.Err(err).End()
		if err != nil {
			return fmt.Errorf("%s backward: %w", n.label(i), err)
		}
	}
	return nil
}

// fusedNorm reports whether node i is a batch norm run with its ReLU
// (fused).
func (m *Model) fusedNorm(i int) bool { return i >= 0 && m.fused != nil && m.fused[i] }

// sameBuffer reports whether node i works in its input's buffers.
func (m *Model) sameBuffer(i int) bool {
	n := m.nodes[i]
	return n.from >= 0 && m.acts[i] == m.acts[n.from]
}

// layerSpan begins a layer's span in a network's timeline (an MLP's has
// only the forward and backward spans, as before networks).
func (m *Model) layerSpan(n node, suffix string) trace.Span {
	if len(m.Arch.Net) == 0 {
		return trace.Nop.Begin("")
	}
	name := n.Name
	if name == "" {
		name = n.Kind
	}
	return m.Tracer.Begin(name+suffix).Cat(trace.Compute).Arg("rows", m.rows)
}

// hooked tells hook that node i's parameters' gradient is complete.
func (m *Model) hooked(hook GradHook, n node, i int) error {
	if hook == nil {
		return nil
	}
	l := m.layers[n.param]
	if err := hook(n.param, l.WOff, l.End); err != nil {
		return fmt.Errorf("%s gradient hook: %w", n.label(i), err)
	}
	return nil
}

// Predict writes the predicted class of each row of the batch last
// uploaded into out (rows elements, float32 class indices).
func (m *Model) Predict(out kernels.Buffer) error {
	logits, err := m.Forward()
	if err != nil {
		return err
	}
	return m.B.Predict(out, logits, m.rows, m.outputs())
}

// Score is a model's summed results on a set of samples.
type Score struct {
	Correct, LossSum, N float64
}

// Score runs the model over set in batches of MaxRows (reusing the
// model's buffers) and returns the correct count and summed loss. It
// overwrites the batch last uploaded.
func (m *Model) Score(set *data.Dense) (Score, error) {
	if set.Cols != m.Arch.Sizes[0] {
		return Score{}, fmt.Errorf("the data has %d features, the model takes %d", set.Cols, m.Arch.Sizes[0])
	}
	idx := make([]int, 0, m.MaxRows)
	var s Score
	for lo := 0; lo < set.Rows; lo += m.MaxRows {
		rows := min(m.MaxRows, set.Rows-lo)
		idx = idx[:0]
		for i := lo; i < lo+rows; i++ {
			idx = append(idx, i)
		}
		if _, err := m.loadBatch(set, idx, nil); err != nil {
			return Score{}, err
		}
		logits, err := m.Forward()
		if err != nil {
			return Score{}, err
		}
		g := m.B.View(m.evalGrad, 0, rows*m.outputs())
		if err := m.loss(g, logits, 0, m.evalStats); err != nil {
			return Score{}, fmt.Errorf("evaluation: %w", err)
		}
		if err := m.B.Download(m.statsHost, m.evalStats); err != nil {
			return Score{}, fmt.Errorf("evaluation: %w", err)
		}
		s.LossSum += float64(m.statsHost[0])
		s.Correct += float64(m.statsHost[1])
	}
	s.N = float64(set.Rows)
	return s, nil
}
