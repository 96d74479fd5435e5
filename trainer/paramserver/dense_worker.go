package paramserver

import (
	"fmt"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/ckpt"
	"github.com/dml-project/dml/trainer/config"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/engine"
	"github.com/dml-project/dml/trainer/model"
	"github.com/dml-project/dml/trainer/trace"
)

// The dense worker: a psWorker that trains a dense model, pulling its
// weights (every key, or under --sparse-rows the keys its batch reaches)
// and pushing its gradient each step, or under Downpour every
// --fetch-every / --push-every steps (downpour.go holds that state).

// Hooks: a dense worker's adds its model's state and a re-dealt epoch's
// rows.
func (d *denseWorker) Hooks() engine.Hooks {
	h := d.psWorker.Hooks()
	h.SaveState, h.ModelState, h.SetTrain = d.saveState, d.modelState, d.setTrain
	return h
}

// denseWorker trains a dense Model through the parameter server: pull all
// weights, compute on the backend, push the whole gradient.
type denseWorker struct {
	psWorker
	m       *model.Model
	train   *data.Dense // this worker's shard, or a re-dealt epoch's part (setTrain)
	shard   *data.Dense
	testAll *data.Dense // the whole test set (the reporting worker measures it alone)
	params  []float32
	host    []float32 // gradient + stats
	rows    int
	sc      float32
	dp      *downpour // --fetch-every/--push-every (downpour.go); nil: every step
	// sparse: the model's tables whose gradient reaches only the rows a
	// batch names (model.SparseKeys) are a large share of it
	// (sparseShare), and each pull and push carries only the keys the
	// batch reaches (keys, vals); not under Downpour, whose pushes sum
	// several batches.
	sparse bool
	keys   []int64
	vals   []float32
	// batchKeys, merged: addKeys' buffers (a micro-batch's keys; the
	// union being built).
	batchKeys, merged []int64
	// stale: d.params holds rows pulled before the last step's (sparse
	// pulls), which evaluation must not read.
	stale bool
	// accum: --accumulate's micro-batches (nil: a step is one batch);
	// the push is their summed gradient, once a step.
	accum *model.Accumulator
}

func newDenseWorker(j *engine.Job, w *ps.Worker, m *model.Model, train, testAll *data.Dense, accum *model.Accumulator) (*denseWorker, error) {
	np := m.NumParams()
	d := &denseWorker{psWorker: newPSWorker(j, w, m.Arch), m: m, train: train, shard: train, testAll: testAll,
		params: make([]float32, np), host: make([]float32, np+model.GradStats), dp: newDownpour(j.Cfg.PS, np, j.Cfg.Opt.LR), accum: accum}
	switch j.Cfg.PS.SparseRows {
	case config.SparseOn: // the model has sparse rows (psUnit.run)
		d.sparse = true
	case config.SparseOff:
	default:
		d.sparse = d.dp == nil && sparseShare*m.SparseWeights() >= np
	}
	return d, nil
}

// sparseShare: by default (Config.PS.SparseRows auto) a worker pulls and
// pushes sparse when the sparse tables hold at least 1/sparseShare of the
// model's weights. Below that the bytes saved are few, and the keys of
// the rest of the model (8 bytes each in memory, on the worker and the
// servers; a few bytes as runs on the wire) and their passes cost more
// than they save.
const sparseShare = 8

// Describe: the parameter server's line, and whether pushes are sparse.
func (d *denseWorker) Describe() string {
	line := d.psWorker.Describe()
	if d.sparse {
		line += ", sparse pulls and pushes (the table rows each batch reaches)"
	}
	return line
}

// setTrain: see Hooks.SetTrain.
func (d *denseWorker) setTrain(t *data.Dense) {
	if t == nil {
		t = d.shard
	}
	d.train = t
}

func (d *denseWorker) Prepare(idx []int, step int) error {
	if d.sparse {
		return d.prepareSparse(idx, step)
	}
	var err error
	d.wait = 0
	if d.dp == nil || d.dp.fetch {
		// Under Downpour, between fetches the local copy in d.params is
		// what the step computes on.
		if d.wait, err = d.timed("pull", len(d.params), func() error { return d.w.Pull(d.params) }); err != nil {
			return err
		}
		if d.dp != nil {
			d.dp.fetch = false
		}
	}
	if err := d.upload(); err != nil {
		return err
	}
	if err := d.loadBatch(idx, step); err != nil {
		return err
	}
	d.sc = d.scale(d.rows, step)
	return nil
}

// loadBatch loads rows idx of the training set for step (a "batch" span):
// under --accumulate the first micro-batch's; d.rows is the step's.
func (d *denseWorker) loadBatch(idx []int, step int) error {
	first := d.accum.First(idx)
	sp := d.j.Trace.Begin("batch").Cat(trace.IO).Arg("rows", len(first))
	d.j.Loaded(step, d.train, idx, d.bspBatch(step))
	rows, err := d.m.LoadBatch(d.train, first)
	d.rows = rows + len(idx) - len(first)
	sp.Err(err).End()
	return err
}

// stepKeys sets d.keys to the keys the step's micro-batches after the
// first reach (under --accumulate; none without), each loaded in turn,
// sorted, each key once.
func (d *denseWorker) stepKeys(idx []int) error {
	d.keys = d.keys[:0]
	micro := d.accum.Micro()
	for lo := micro; d.accum != nil && lo < len(idx); lo += micro {
		if _, err := d.m.LoadBatch(d.train, idx[lo:min(lo+micro, len(idx))]); err != nil {
			return err
		}
		d.addKeys()
	}
	return nil
}

// addKeys adds to d.keys (sorted, each once) the keys the loaded batch
// reaches (model.SparseKeys, sorted), merging the two.
func (d *denseWorker) addKeys() {
	d.batchKeys = d.m.SparseKeys(d.batchKeys[:0])
	a, b := d.keys, d.batchKeys
	out := d.merged[:0]
	for len(a) > 0 && len(b) > 0 {
		switch {
		case a[0] < b[0]:
			out, a = append(out, a[0]), a[1:]
		case b[0] < a[0]:
			out, b = append(out, b[0]), b[1:]
		default:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	out = append(append(out, a...), b...)
	d.keys, d.merged = out, d.keys
}

// upload puts d.params on the backend (an "upload" span).
func (d *denseWorker) upload() error {
	sp := d.j.Trace.Begin("upload").Cat(trace.IO).Bytes(4 * len(d.params))
	err := d.j.Backend.Upload(d.m.Params, d.params)
	sp.Err(err).End()
	return err
}

// pullAll pulls every weight into d.params and puts them on the backend;
// it returns the pull's seconds.
func (d *denseWorker) pullAll() (float64, error) {
	sec, err := d.timed("pull", len(d.params), func() error { return d.w.Pull(d.params) })
	if err != nil {
		return sec, err
	}
	return sec, d.j.Backend.Upload(d.m.Params, d.params)
}

// prepareSparse loads the batch first, then pulls the keys it reaches
// (model.SparseKeys: every weight but the rows of the sparse tables that
// the batch does not name, which the step does not read), so that the
// pull, as the push, carries the batch's working set. The rows left out
// keep, in d.params, what was pulled last.
func (d *denseWorker) prepareSparse(idx []int, step int) error {
	if err := d.stepKeys(idx); err != nil {
		return err
	}
	if err := d.loadBatch(idx, step); err != nil { // the first micro-batch, which the step starts from
		return err
	}
	d.addKeys()
	d.vals = grow(d.vals, len(d.keys))
	var err error
	if d.wait, err = d.timed("pull", len(d.keys), func() error { return d.w.PullKeys(d.keys, d.vals) }); err != nil {
		return err
	}
	for i, k := range d.keys {
		d.params[k] = d.vals[i]
	}
	d.stale = true
	err = d.upload()
	d.sc = d.scale(d.rows, step)
	return err
}

func (d *denseWorker) Compute() error { return d.m.StepMicro(d.accum, d.sc, d.train, d.j.Trace) }

// Exchange checks the worker's own gradient for NaN/Inf on its host copy
// and pushes it.
func (d *denseWorker) Exchange(int) (engine.StepStats, error) {
	np := d.m.NumParams()
	grads := d.host
	if hb, ok := d.m.Grads.(kernels.HostBuffer); ok {
		grads = hb.Data()
	} else {
		sp := d.j.Trace.Begin("download").Cat(trace.IO).Bytes(4 * len(grads))
		err := d.j.Backend.Download(grads, d.m.Grads)
		sp.Err(err).End()
		if err != nil {
			return engine.StepStats{}, err
		}
	}
	st := engine.StepStats{LossSum: float64(grads[np]), Correct: float64(grads[np+1]), Samples: float64(d.rows)}
	if err := d.arch.CheckFinite(grads[:np], st.LossSum); err != nil {
		return engine.StepStats{}, err
	}
	if c := d.j.Cfg.ClipNorm; c > 0 && d.rows > 0 {
		// This worker's own batch's mean gradient (clip.go): the push is
		// it times sc·rows.
		engine.ClipHost(grads[:np], 1/(float64(d.sc)*float64(d.rows)), c)
	}
	var push float64
	var err error
	switch {
	case d.dp != nil:
		push, err = d.downpourStep(grads[:np])
	case d.sparse:
		push, err = d.pushSparse(grads[:np])
	default:
		push, err = d.timed("push", np, func() error { return d.w.Push(grads[:np]) })
	}
	st.CommSec = d.wait + push
	return st, err
}

// pushSparse pushes the keys of grads the batch reached (those Prepare
// pulled; the others are 0: model.SparseKeys); the servers step only
// those.
func (d *denseWorker) pushSparse(grads []float32) (float64, error) {
	for i, k := range d.keys {
		d.vals[i] = grads[k]
	}
	return d.timed("push", len(d.keys), func() error { return d.w.PushKeys(d.keys, d.vals) })
}

// EndEpoch: under Downpour the epoch's last period ends here: the worker
// pushes what it accumulated and fetches the servers' weights, which the
// epoch's evaluation then measures (downpour.go).
func (d *denseWorker) EndEpoch(st *engine.EpochStats, commSec, stepSec, wall float64) error {
	if d.dp != nil {
		push, err := d.flush()
		if err != nil {
			return err
		}
		pull, err := d.pullAll()
		if err != nil {
			return err
		}
		d.dp.fetch = false
		commSec += push + pull
	}
	return d.psWorker.EndEpoch(st, commSec, stepSec, wall)
}

// saveState: under Downpour every worker first pushes what it
// accumulated (and fetches at its next step), so that the servers' state
// the checkpoint takes is the whole of it; the checkpoint records the
// workers' clock (checkpointMeta.Pushes).
func (d *denseWorker) saveState() (*ckpt.File, error) {
	if d.dp == nil {
		return d.psWorker.saveState()
	}
	if _, err := d.flush(); err != nil {
		return nil, fmt.Errorf("checkpoint: pushing the accumulated gradient: %w", err)
	}
	clock := d.w.Clock()
	c, err := d.psWorker.saveState()
	if c != nil {
		c.Meta.Pushes = clock
	}
	return c, err
}

// modelState: this worker's own batch-norm statistics (a checkpoint under
// ps keeps the reporting worker's: its workers are not in step).
func (d *denseWorker) modelState() ([]float32, error) {
	if d.m.State == nil {
		return nil, nil
	}
	st := make([]float32, d.m.State.Len())
	return st, d.j.Backend.Download(st, d.m.State)
}

// Evaluate measures the whole test set, on the reporting worker only (the
// others return NaN), with its own batch-norm statistics, on weights
// pulled now: they hold its own last push and, under bsp, every worker's,
// so that the last epoch's line is the final weights' (the weights pulled
// for the last step missed that step's pushes). Under Downpour it
// measures its local copy, which the next steps go on from.
func (d *denseWorker) Evaluate() (engine.EvalResult, error) {
	if !d.j.Reports() {
		return engine.NotEvaluated, nil
	}
	if d.stale || d.dp == nil {
		// Sparse pulls: the test set may name rows the last batches did
		// not.
		if _, err := d.pullAll(); err != nil {
			return engine.EvalResult{}, err
		}
		d.stale = false
	}
	s, err := d.m.Score(d.testAll)
	if err != nil {
		return engine.EvalResult{}, err
	}
	return engine.SumScores(nil, s)
}

// downpourStep is Exchange's part under Downpour for gradient g of the
// step just computed: accumulate, step the local copy, push when the
// period ends. It returns the seconds spent pushing.
func (d *denseWorker) downpourStep(g []float32) (float64, error) {
	dp := d.dp
	if dp.sincePush == 0 {
		copy(dp.acc, g) // exactly g: with P = 1 the push is the gradient itself
	} else {
		for i, v := range g {
			dp.acc[i] += v
		}
	}
	dp.sincePush++
	optim.SGDUpdate(d.params, g, dp.lr, 0)
	dp.sinceFetch++
	if dp.sinceFetch == dp.fetchEvery {
		dp.fetch, dp.sinceFetch = true, 0
	}
	if dp.sincePush < dp.pushEvery {
		return 0, nil
	}
	return d.pushAccumulated()
}

// flush ends the period early (an epoch's end, a checkpoint): push what
// was accumulated, and fetch at the next step.
func (d *denseWorker) flush() (float64, error) {
	if d.dp == nil {
		return 0, nil
	}
	d.dp.fetch, d.dp.sinceFetch = true, 0
	return d.pushAccumulated()
}

// SetStep: the rate of the step about to run (Strategy's SetStep); under
// Downpour the worker's local step uses it.
func (d *denseWorker) SetStep(lr float32, _ int) {
	if d.dp != nil {
		d.dp.lr = lr
	}
}

// pushAccumulated pushes the sum since the last push, if any.
func (d *denseWorker) pushAccumulated() (float64, error) {
	dp := d.dp
	if dp == nil || dp.sincePush == 0 {
		return 0, nil
	}
	dp.sincePush = 0
	return d.timed("push", len(dp.acc), func() error { return d.w.Push(dp.acc) })
}
