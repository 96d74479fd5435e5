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
	// RowKeys, if not nil, writes each row's dropout key for a training
	// batch LoadBatch gathered from rows idx of the set (package trainer:
	// kernels.DropoutRowKey of the seed, the epoch and the sample's index
	// in the whole training set, so that a sample's mask is the same on
	// any number of ranks and after a resume); nil: DropoutRowKey(0, 0,
	// idx[r]). Only a network with dropout calls it.
	RowKeys func(keys []uint32, idx []int)
	// SyncBN, where not nil, makes every batch norm normalise a training
	// batch with the statistics of every rank's batch (PyTorch's
	// SyncBatchNorm, layer_norm.go): it sums a short vector over the
	// ranks (package trainer: an AllReduce), twice per batch norm per
	// step, in the same order on every rank. Batch norms then run
	// unfused, and Step records no graph.
	SyncBN func(v []float32) error
	// Tracer receives "forward" and "backward" spans (trace.Nop from New),
	// and for a network (Arch.Net) one span per layer inside them, named
	// by the layer ("conv1", "relu", "maxpool"; "conv1 backward" in the
	// backward pass).
	Tracer trace.Tracer
	// Interrupt, if not nil, is asked before each batch Score evaluates:
	// true ends the evaluation there (a stop signal came: a long test set
	// is not scored to its end first), Score.Interrupted.
	Interrupt func() bool

	nodes  []node
	layers []Layer // the layers with parameters, in Arch.Layers' order
	np     int
	batch  kernels.Buffer   // MaxRows×(inputs+1): features, then labels
	acts   []kernels.Buffer // acts[i] is node i's output (a ReLU's or a flatten's is its input's buffer)
	dacts  []kernels.Buffer // the gradient w.r.t. acts[i] (nil for node 0's input)
	owned  []kernels.Buffer // everything Alloc returned, for Free
	rows   int              // rows of the batch loaded

	// conv: the backend's kernels.ConvOps, where a layer needs them
	// (convolution, pooling); cv: what the convolutions run with
	// (layer_conv.go); bn: what the batch norms run with
	// (layer_norm.go).
	conv kernels.ConvOps
	cv   convRun
	bn   normRun
	// tf: the backend's kernels.TransformerOps, where a layer needs them
	// (GELU, layer norm); own[i]: node i's own scratch, which its kind
	// allocates in setup (layer norm's per-row statistics).
	tf  kernels.TransformerOps
	own []kernels.Buffer
	// padPool: the backend's kernels.PadPoolOps, where a max pool has
	// padding.
	padPool kernels.PadPoolOps
	// libPool: the backend's kernels.LibPoolOps, where a library pools
	// data in its own layouts (layer_pool.go).
	libPool kernels.LibPoolOps
	// lrn: the backend's kernels.LRNOps, where a layer normalises across
	// channels (layer_lrn.go).
	lrn kernels.LRNOps
	// sq: what the sequence layers run with (layer_embedding.go).
	sq seqRun
	// keys: each row's dropout key (kernels.DropoutRowKey, as float32
	// bits) for the training batch LoadBatch loaded, where the network
	// has dropout (layer_dropout.go); hostKeys, keyBits: its host side.
	keys     kernels.Buffer
	hostKeys []float32
	keyBits  []uint32
	// State holds every layer's buffers, batch norm's running statistics
	// (Arch.StateTensors; Upload Arch.InitState to start).
	State kernels.Buffer
	// training: Forward normalises with the batch's statistics (Step);
	// otherwise with the running ones (Predict, Score).
	training bool
	// scratch holds a gradient to be added to one that a node's output
	// already received (a block's input is read twice).
	scratch kernels.Buffer
	have    []bool // backward: node i's output gradient has a first part
	// kinds[i] is node i's kind.
	kinds []layerKind

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
	hostX   []float32
	pinnedX bool
	hostG   []float32 // a token sequence's windows, as gathered (loadBatch)
	// batchTokens are the tokens of the batch last uploaded (TokenCE):
	// the rows its gradient reaches (SparseKeys).
	batchTokens []float32
	hostY       []int32
	evalGrad    kernels.Buffer
	evalStats   kernels.Buffer
	statsHost   []float32
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
	m := &Model{Arch: arch, B: b, MaxRows: maxRows, Tracer: trace.Nop, nodes: arch.mustNodes(), layers: arch.Layers(), np: arch.NumParams()}
	m.cv.choice = choice
	a := &allocator{m: m}
	m.Params = a.alloc("parameters", m.np)
	m.Grads = a.alloc("gradient", m.np+GradStats)
	in, labels := arch.rowLayout()
	m.batch = a.alloc("batch", maxRows*(in+labels))
	m.nodeBuffers(a)
	if arch.hasForks() {
		m.scratch = a.alloc("gradient scratch", maxRows*arch.largestOutput())
	}
	if ns := arch.NumState(); ns > 0 {
		m.State = a.alloc("batch-norm running statistics", ns)
		a.then(func() error { return b.Upload(m.State, arch.InitState()) })
	}
	if err := m.setupKinds(a); err != nil {
		return nil, errors.Join(err, m.Free())
	}
	m.evalGrad = a.alloc("evaluation scratch", maxRows*m.nodes[len(m.nodes)-1].out.Size())
	m.evalStats = a.alloc("evaluation statistics", GradStats)
	if a.failed != nil {
		return nil, errors.Join(a.failed, m.Free())
	}
	if err := m.hostBuffers(); err != nil {
		return nil, errors.Join(err, m.Free())
	}
	return m, nil
}

// setupKinds has each kind of layer in the network, in order of first
// use, find its ops and allocate its buffers (layerKind.setup).
func (m *Model) setupKinds(a *allocator) error {
	m.kinds, m.own = make([]layerKind, len(m.nodes)), make([]kernels.Buffer, len(m.nodes))
	done := map[layerKind]bool{}
	for i, n := range m.nodes {
		k := n.kind()
		m.kinds[i] = k
		if done[k] {
			continue
		}
		done[k] = true
		if err := k.setup(m, a); err != nil {
			return err
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
// add, as inPlace says).
func (m *Model) nodeBuffers(a *allocator) {
	maxRows := m.MaxRows
	for i, in := range inPlace(m.nodes) {
		n := m.nodes[i]
		name := n.Name
		if name == "" {
			name = fmt.Sprintf("layer %d (%s)", i, n.Kind)
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

// hostBuffers makes the host side: the batch's staging (pinned where the
// backend has host allocations) and the labels' and statistics' copies.
func (m *Model) hostBuffers() error {
	in, labels := m.Arch.rowLayout()
	nx := m.MaxRows * max(m.Arch.Sizes[0]+1, in+labels)
	if m.Arch.Loss == TokenCE {
		m.hostG = make([]float32, m.MaxRows*m.Arch.Sizes[0])
	}
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

// rowLayout is what a row of a batch holds on the backend: in inputs and
// labels labels (float32 class indices): Sizes[0] features and one label,
// or for a token sequence (TokenCE) its T input tokens and T targets.
func (a Arch) rowLayout() (in, labels int) {
	if a.Loss == TokenCE {
		return a.Input.T, a.Input.T
	}
	return a.Sizes[0], 1
}

// Upload puts a batch on the backend: x holds rows × inputs features, y
// the rows' labels as float32 class indices, and y must directly follow x
// in one slice (x = hv[:rows*inputs], y = hv[rows*inputs:]) so that the
// batch travels in one Upload. hv is rows×(inputs+1) long; for a token
// sequence of T (TokenCE), x is rows × T tokens and y their rows × T
// targets.
func (m *Model) Upload(hv []float32, rows int) error {
	in, labels := m.Arch.rowLayout()
	if rows < 0 || rows > m.MaxRows || len(hv) != rows*(in+labels) {
		return fmt.Errorf("model: batch of %d floats for %d rows of %d features and %d labels: want %d rows at most and rows×(features+labels) floats: %w",
			len(hv), rows, in, labels, m.MaxRows, kernels.ErrShape)
	}
	if err := m.B.Upload(m.B.View(m.batch, 0, len(hv)), hv); err != nil {
		return fmt.Errorf("uploading a batch of %d rows: %w", rows, err)
	}
	m.rows = rows
	if m.Arch.Loss == TokenCE {
		m.batchTokens = append(m.batchTokens[:0], hv[:rows*in]...) // SparseKeys
	}
	return nil
}

// LoadBatch gathers rows idx of set (features and labels) into the host
// staging buffer and uploads them in one piece. It returns the rows loaded.
func (m *Model) LoadBatch(set *data.Dense, idx []int) (int, error) {
	rows, err := m.loadBatch(set, idx, m.Augment)
	if err != nil || m.keys == nil {
		return rows, err
	}
	return rows, m.uploadKeys(idx)
}

func (m *Model) loadBatch(set *data.Dense, idx []int, augment func([]float32, []int)) (int, error) {
	rows, in := len(idx), m.Arch.Sizes[0]
	if rows > m.MaxRows {
		return 0, fmt.Errorf("model: batch of %d rows, room for %d: %w", rows, m.MaxRows, kernels.ErrShape)
	}
	if m.Arch.Loss == TokenCE {
		return rows, m.loadTokens(set, idx)
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

// loadTokens loads windows idx of a token sequence's set: each window's
// first T tokens as the inputs, and its last T, one further on, as their
// targets.
func (m *Model) loadTokens(set *data.Dense, idx []int) error {
	rows, t := len(idx), m.Arch.Input.T
	g := m.hostG[:rows*(t+1)]
	if err := set.Gather(g, nil, idx); err != nil {
		return err
	}
	hv := m.hostX[:2*rows*t]
	for r := range rows {
		w := g[r*(t+1) : (r+1)*(t+1)]
		copy(hv[r*t:(r+1)*t], w[:t])
		copy(hv[(rows+r)*t:(rows+r+1)*t], w[1:])
	}
	return m.Upload(hv, rows)
}

func (m *Model) view(buf kernels.Buffer, rows, cols int) kernels.Buffer {
	return m.B.View(buf, 0, rows*cols)
}

func (m *Model) labels(rows int) kernels.Buffer {
	in, labels := m.Arch.rowLayout()
	return m.B.View(m.batch, rows*in, rows*labels)
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
		in, _ := m.Arch.rowLayout()
		return m.view(m.batch, m.rows, in)
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

// recovered runs f, a layer's ops, with a library's failure inside a
// buffer accessor (kernels.OpFailure) returned as f's error.
func recovered(f func() error) (err error) {
	defer kernels.RecoverOp(&err)
	return f()
}

// Forward runs the batch last uploaded through the layers and returns the
// logits (rows × outputs).
func (m *Model) Forward() (kernels.Buffer, error) {
	rows := m.rows
	for i, n := range m.nodes {
		x, y := m.input(i), m.view(m.acts[i], rows, n.out.Size())
		sp := m.layerSpan(n, "")
		err := recovered(func() error { return m.kinds[i].forward(m, i, n, x, y) })
		sp.Err(err).End()
		if err != nil {
			return nil, fmt.Errorf("%s forward: %w", n.label(i), err)
		}
	}
	return m.view(m.acts[len(m.nodes)-1], rows, m.nodes[len(m.nodes)-1].out.Size()), nil
}

func (m *Model) outputs() int { return m.Arch.Sizes[len(m.Arch.Sizes)-1] }

// scored is the rows of logits the loss scores: the batch's rows, or
// each of their positions for a token sequence.
func (m *Model) scored() int {
	_, labels := m.Arch.rowLayout()
	return m.rows * labels
}

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
	case TokenCE:
		// Each position a row of its own, a sample the mean of its
		// positions: the gradient and the statistics divided by T.
		t := float32(m.Arch.Input.T)
		err = m.B.SoftmaxCrossEntropy(grad, logits, m.labels(rows), m.scored(), m.outputs(), scale/t, stats)
		if err == nil {
			err = m.B.Scale(1/t, stats)
		}
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
func (m *Model) Step(scale float32, hook GradHook) (err error) {
	defer kernels.RecoverOp(&err) // the loss's and the update's ops (recovered)
	if m.UseGraph && hook == nil && m.SyncBN == nil {
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
// loss scale that changed (lossscale.go in trainer/allreduce) leaves them
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
		dlogits := m.view(m.dacts[last], m.rows, m.nodes[last].out.Size())
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
	rows := m.rows
	clear(m.have)
	m.have[len(m.nodes)-1] = true // the loss wrote the logits' gradient
	for i := len(m.nodes) - 1; i >= 0; i-- {
		n := m.nodes[i]
		x, dy := m.input(i), m.view(m.dacts[i], rows, n.out.Size())
		sp := m.layerSpan(n, " backward")
		err := recovered(func() error { return m.kinds[i].backward(m, i, n, x, dy, hook) })
		sp.Err(err).End()
		if err != nil {
			return fmt.Errorf("%s backward: %w", n.label(i), err)
		}
	}
	return nil
}

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
// uploaded into out (rows elements, float32 class indices; for a token
// sequence, each position's next token: rows × T).
func (m *Model) Predict(out kernels.Buffer) error {
	logits, err := m.Forward()
	if err != nil {
		return err
	}
	return m.B.Predict(out, logits, m.scored(), m.outputs())
}

// Score is a model's summed results on a set of samples.
type Score struct {
	Correct, LossSum, N float64
	// Interrupted: Interrupt ended the evaluation before the set's end (N
	// counts the samples scored).
	Interrupted bool
}

// Score runs the model over set in batches of MaxRows (reusing the
// model's buffers) and returns the correct count and summed loss. It
// overwrites the batch last uploaded.
func (m *Model) Score(set *data.Dense) (_ Score, err error) {
	defer kernels.RecoverOp(&err)
	if set.Cols != m.Arch.Sizes[0] {
		return Score{}, fmt.Errorf("the data has %d features, the model takes %d", set.Cols, m.Arch.Sizes[0])
	}
	idx := make([]int, 0, m.MaxRows)
	var s Score
	for lo := 0; lo < set.Rows; lo += m.MaxRows {
		if m.Interrupt != nil && m.Interrupt() {
			s.N, s.Interrupted = float64(lo), true
			return s, nil
		}
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
		g := m.B.View(m.evalGrad, 0, m.scored()*m.outputs())
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
