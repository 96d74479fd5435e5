package paramserver

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/ckpt"
	"github.com/dml-project/dml/trainer/config"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/engine"
	"github.com/dml-project/dml/trainer/model"
	"github.com/dml-project/dml/trainer/stopvote"
	"github.com/dml-project/dml/trainer/trace"
)

// The parameter server's workers: what every worker strategy shares
// (psWorker: its scale, its waits, its checkpoint part) and the dense
// model's worker (denseWorker; sync_sparse.go has the sparse one).

// psWorker is the bookkeeping every parameter-server worker strategy
// shares: its gradient scale, its wait, its epoch figures. Its loss and
// accuracy are the worker's own samples' (ScopeWorker).
type psWorker struct {
	j    *engine.Job
	w    *ps.Worker
	arch model.Arch
	prev ps.WorkerStats
	wait float64 // seconds waited in the current step's Pull

	vote stopvote.Vote // the stop vote's state (voteStop)
}

func newPSWorker(j *engine.Job, w *ps.Worker, arch model.Arch) psWorker {
	return psWorker{j: j, w: w, arch: arch, prev: w.Stats(),
		vote: stopvote.Vote{BSP: j.Cfg.PS.Consistency == ps.BSP, Workers: j.Sched.Ranks, Me: j.ShardIdx}}
}

// scale is the factor a worker's gradient of its summed loss over rows
// samples carries at step `step`. BSP: the server averages the workers'
// pushes, so each is scaled by workers/global batch and the average is the
// global batch's mean gradient, as under AllReduce. SSP, ASP, DSSP: the
// server applies each push as it comes (Downpour), so each carries 1/W of
// this worker's mean gradient: W pushes then move the weights about as far
// as one synchronous step with the same --lr.
func (p *psWorker) scale(rows, step int) float32 {
	workers := p.j.Sched.Ranks
	if gb := p.bspBatch(step); gb >= 0 {
		return float32(workers) / float32(gb)
	}
	return 1 / float32(max(1, rows)*workers)
}

// bspBatch is the global batch of step under bsp, −1 otherwise.
func (p *psWorker) bspBatch(step int) int {
	if p.j.Cfg.PS.Consistency != ps.BSP {
		return -1
	}
	return p.j.GlobalBatch(step)
}

// sentBytes: the ps worker's pushes and pulls (ps.WorkerStats.BytesSent).
func (p *psWorker) sentBytes() int64 { return p.w.Stats().BytesSent }

// Hooks: every worker writes checkpoints (the servers' state), votes on a
// stop among the workers and counts its pushes and pulls.
func (p *psWorker) Hooks() engine.Hooks {
	return engine.Hooks{SaveState: p.saveState, VoteStop: p.voteStop, SentBytes: p.sentBytes}
}

// Hooks: a dense worker's adds its model's state and a re-dealt epoch's
// rows.
func (d *denseWorker) Hooks() engine.Hooks {
	h := d.psWorker.Hooks()
	h.SaveState, h.ModelState, h.SetTrain = d.saveState, d.modelState, d.setTrain
	return h
}

func (p *psWorker) Describe() string {
	cfg := p.j.Cfg
	line := fmt.Sprintf("training %s %v on %d samples: %d workers × batch %d, %d server(s), %s, %s server-side",
		cfg.Model, p.arch.Describe(), p.j.Sched.N, p.j.Sched.Ranks, cfg.Batch, cfg.PS.Servers, consistencyLabel(cfg.PS), cfg.Opt.Kind)
	if f, u := cfg.PS.FetchPeriod(), cfg.PS.PushPeriod(); f > 1 || u > 1 {
		line += fmt.Sprintf(", Downpour: fetch every %d steps, push every %d (local SGD steps in between)", f, u)
	}
	return line
}

func (p *psWorker) Scope() engine.Scope { return engine.ScopeWorker }

// timed runs f (a Pull or Push of n floats) in a span named name and
// returns the seconds it took.
// With a timeline the span carries the worker's clock, the time the
// servers held the call (held_us: the consistency controller's wait, also
// drawn as a "consistency-wait" span inside it) and, for a pull, its
// staleness.
func (p *psWorker) timed(name string, n int, f func() error) (float64, error) {
	sp := p.j.Trace.Begin(name).Cat(trace.PS).Bytes(4 * n)
	traced := trace.Enabled(p.j.Trace)
	var before ps.TraceFigures
	if traced {
		before = p.w.TraceFigures()
	}
	t0 := time.Now()
	err := f()
	t1 := time.Now()
	if traced {
		after := p.w.TraceFigures()
		held := time.Duration((after.HeldSeconds - before.HeldSeconds) * 1e9)
		sp = sp.Arg("clock", before.Clock).Arg("held_us", int(held/time.Microsecond))
		if after.Pulls == before.Pulls+1 {
			sp = sp.Arg("staleness", after.StalenessSum-before.StalenessSum)
		}
		if held > 0 {
			// The servers held the request until the consistency model
			// let it through: drawn at the end of the call.
			trace.Complete(p.j.Trace, "consistency-wait", trace.Wait, t1.Add(-min(held, t1.Sub(t0))), t1,
				trace.Arg{Key: "clock", Value: int64(before.Clock)})
		}
	}
	sp.Err(err).End()
	return t1.Sub(t0).Seconds(), err
}

// EndEpoch: the share of the epoch spent waiting in Pull and Push, and the
// worker's parameter-server figures since the last epoch.
func (p *psWorker) EndEpoch(st *engine.EpochStats, commSec, _, wall float64) error {
	now := p.w.Stats()
	st.CommFraction = commSec / wall
	st.PSStats = psDelta(p.prev, now, wall)
	p.prev = now
	return nil
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
	// stale: d.params holds rows pulled before the last step's (sparse
	// pulls), which evaluation must not read.
	stale bool
}

func newDenseWorker(j *engine.Job, w *ps.Worker, m *model.Model, train, testAll *data.Dense) (*denseWorker, error) {
	np := m.NumParams()
	d := &denseWorker{psWorker: newPSWorker(j, w, m.Arch), m: m, train: train, shard: train, testAll: testAll,
		params: make([]float32, np), host: make([]float32, np+model.GradStats), dp: newDownpour(j.Cfg.PS, np, j.Cfg.Opt.LR)}
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

// loadBatch loads rows idx of the training set for step (a "batch" span).
func (d *denseWorker) loadBatch(idx []int, step int) error {
	sp := d.j.Trace.Begin("batch").Cat(trace.IO).Arg("rows", len(idx))
	d.j.Loaded(step, d.train, idx, d.bspBatch(step))
	var err error
	d.rows, err = d.m.LoadBatch(d.train, idx)
	sp.Err(err).End()
	return err
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
	if err := d.loadBatch(idx, step); err != nil {
		return err
	}
	d.keys = d.m.SparseKeys(d.keys[:0])
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

func (d *denseWorker) Compute() error { return d.m.Step(d.sc, nil) }

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

// Evaluate measures the whole test set with the weights last pulled, on
// the reporting worker only (the others return NaN), with its own
// batch-norm statistics.
func (d *denseWorker) Evaluate() (engine.EvalResult, error) {
	if !d.j.Reports() {
		return engine.NotEvaluated, nil
	}
	if d.stale {
		// The test set may name rows the last batches did not: pull
		// every weight.
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

// saveState: the reporting worker asks the servers for their state and
// collects the other workers' filter residues; they send theirs.
func (p *psWorker) saveState() (*ckpt.File, error) {
	j := p.j
	var mine [][]float32
	for _, f := range p.w.Filters() {
		if r := ps.Residue(f); r != nil {
			mine = append(mine, r)
		}
	}
	if !j.Reports() {
		for _, r := range mine {
			if err := collectives.Send(j.Comm, r, j.Reporter, engine.TagResidue); err != nil {
				return nil, fmt.Errorf("checkpoint: sending residue to rank %d: %w", j.Reporter, err)
			}
		}
		return nil, nil
	}
	n := p.w.Size()
	c := &ckpt.File{Meta: ckpt.Meta{Arch: p.arch}, State: model.State{Params: make([]float32, n)}}
	if per := j.Cfg.Opt.Kind.StatePer(); per > 0 {
		c.Opt = make([]float32, per*n)
	}
	if err := p.w.Snapshot(c.Params, c.Opt); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	for w := 0; w < j.Sched.Ranks; w++ {
		for f := range mine {
			if w == j.ShardIdx {
				c.Residues = append(c.Residues, slices.Clone(mine[f]))
				continue
			}
			r := make([]float32, n)
			if err := collectives.Recv(j.Comm, r, w+j.Cfg.PS.Servers, engine.TagResidue); err != nil {
				return nil, fmt.Errorf("checkpoint: residue of worker rank %d: %w", w+j.Cfg.PS.Servers, err)
			}
			c.Residues = append(c.Residues, r)
		}
	}
	return c, nil
}

// psDelta is what a worker measured between two snapshots of its stats.
func psDelta(prev, now ps.WorkerStats, wall float64) *engine.PSStats {
	d := &engine.PSStats{
		WaitSec:             now.WaitSeconds - prev.WaitSeconds,
		PushesPerSec:        float64(now.Pushes-prev.Pushes) / wall,
		PullsPerSec:         float64(now.Pulls-prev.Pulls) / wall,
		BytesSent:           now.BytesSent - prev.BytesSent,
		BytesReceived:       now.BytesReceived - prev.BytesReceived,
		PushBytes:           now.PushBytes - prev.PushBytes,
		PushBytesUnfiltered: now.PushBytesUnfiltered - prev.PushBytesUnfiltered,
	}
	for s, n := range now.Staleness.Counts {
		if s < len(prev.Staleness.Counts) {
			n -= prev.Staleness.Counts[s]
		}
		d.StalenessHist = append(d.StalenessHist, n)
		if n > 0 {
			d.MaxStaleness = s
		}
	}
	return d
}

func consistencyLabel(p engine.PSConfig) string {
	switch p.Consistency {
	case ps.SSP:
		return fmt.Sprintf("ssp (staleness %d)", p.Staleness)
	case ps.DSSP:
		return fmt.Sprintf("dssp (staleness %d..%d)", p.StalenessLow, p.StalenessHigh)
	}
	return p.Consistency.String()
}

func grow(v []float32, n int) []float32 {
	if cap(v) < n {
		return make([]float32, n)
	}
	return v[:n]
}

// voteStop: a signalled server sends every worker a note (stopNotifier),
// which counts as the worker's own signal. Under BSP the workers are in
// step, and the first worker gathers their flags and sends back the OR;
// under SSP, ASP and DSSP a worker stops at its own next boundary, and a
// signalled worker sends the other workers a note so that they stop too.
func (p *psWorker) voteStop(local bool) (bool, error) {
	j := p.j
	note, err := p.pollStopNotes()
	if err != nil {
		return false, err
	}
	v := &p.vote
	out := v.Begin(local, note)
	for _, w := range out.Notes {
		if err := j.Comm.SendBytes([]byte{1}, w+j.Cfg.PS.Servers, tagStopNote); err != nil {
			return false, err
		}
	}
	if out.Decided {
		return out.Stop, nil
	}
	to := j.Cfg.Timeout
	if to <= 0 {
		to = collectives.DefaultTimeout
	}
	to = StopVoteWait(to)
	flag := func(b bool) []byte {
		if b {
			return []byte{1}
		}
		return []byte{0}
	}
	if !v.Gathers() {
		if err := j.Comm.SendBytes(flag(out.Flag), j.Reporter, tagStop); err != nil {
			return false, err
		}
		b, _, _, err := j.Comm.RecvBytesWithin(j.Reporter, tagStop, to)
		if err != nil {
			return false, fmt.Errorf("from the first worker (rank %d): %w", j.Reporter, err)
		}
		return len(b) == 1 && b[0] == 1, nil
	}
	flags := make([]bool, 0, v.Workers)
	for _, w := range v.Others() {
		b, _, _, err := j.Comm.RecvBytesWithin(w+j.Cfg.PS.Servers, tagStop, to)
		if err != nil {
			return false, fmt.Errorf("from worker rank %d: %w", w+j.Cfg.PS.Servers, err)
		}
		flags = append(flags, len(b) == 1 && b[0] == 1)
	}
	stop := v.Combine(out.Flag, flags)
	for _, w := range v.Others() {
		if err := j.Comm.SendBytes(flag(stop), w+j.Cfg.PS.Servers, tagStop); err != nil {
			return false, err
		}
	}
	return stop, nil
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

// pollStopNotes takes every stop note that has arrived, without waiting.
func (p *psWorker) pollStopNotes() (bool, error) {
	got := false
	for {
		_, _, _, err := p.j.Comm.RecvBytesWithin(collectives.AnySource, tagStopNote, 0)
		if errors.Is(err, collectives.ErrTimeout) {
			return got, nil
		}
		if err != nil {
			return got, fmt.Errorf("stop notes: %w", err)
		}
		got = true
	}
}
