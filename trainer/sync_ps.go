package trainer

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/model"
	"github.com/dml-project/dml/trainer/trace"
)

// PSStats is what parameter-server workers measured: per epoch for the
// reporting worker (EpochStats) or for the whole run over all workers
// (Result.PS).
type PSStats struct {
	MaxStaleness  int     `json:"max_staleness"`  // largest staleness seen at a pull
	StalenessHist []int   `json:"staleness_hist"` // [s] = pulls that saw staleness s
	WaitSec       float64 `json:"wait_sec"`       // time blocked in Pull and Push
	PushesPerSec  float64 `json:"pushes_per_sec"`
	PullsPerSec   float64 `json:"pulls_per_sec"`
	BytesSent     int64   `json:"bytes_sent"` // all request bytes
	// PushBytes is what the pushes took on the wire after the filters,
	// PushBytesUnfiltered what they would have taken without them.
	PushBytes           int64 `json:"push_bytes"`
	PushBytesUnfiltered int64 `json:"push_bytes_unfiltered"`
}

// psUnit is --sync ps: ranks 0..Servers-1 serve their key ranges, the
// others are workers that pull weights and push gradients (psWorker; the
// dense model's denseWorker here, sparse-logreg's sparseWorker in
// sync_sparse.go).
type psUnit struct{ baseUnit }

func (psUnit) name() string { return "ps" }
func (psUnit) help() string { return "parameter server: workers pull weights and push gradients" }
func (psUnit) validate(c Config) error {
	if err := c.PS.validate(); err != nil {
		return err
	}
	return validateDownpour(c)
}
func (psUnit) servers(c Config) int { return c.PS.Servers }

func (psUnit) validateWorld(c Config, size int) error {
	if c.PS.Servers >= size {
		return bad("PS.Servers", "%d needs at least %d ranks (servers + 1 worker); this job has %d", c.PS.Servers, c.PS.Servers+1, size)
	}
	return nil
}

// variants: one per consistency model, named by it.
func (psUnit) variants() []Variant {
	var out []Variant
	for _, c := range ps.Consistencies {
		out = append(out, Variant{Name: c.String(), Sync: SyncPS, Consistency: c, Servers: true})
	}
	return out
}

// checkCheckpointing: a checkpoint holds one residue per worker, taken at
// one step; under ssp, asp and dssp the workers are not at the same step.
func (psUnit) checkCheckpointing(c Config, _ *Checkpointing) error {
	if c.PS.Consistency == ps.BSP {
		return nil
	}
	if specs, err := ps.ParseFilters(c.PS.Filters); err == nil && slices.ContainsFunc(specs, hasResidue) {
		return bad("PS.Filters", "%q: checkpoints keep the sigmod filter's residues only under bsp (under %v the workers are not at the same step)",
			c.PS.Filters, c.PS.Consistency)
	}
	return nil
}

// checkpointMeta: the servers and the consistency model (Downpour's clock,
// Pushes, is the worker's own, set by its saveState).
func (psUnit) checkpointMeta(j *job, m *checkpointMeta) {
	m.Servers, m.Consistency = j.cfg.PS.Servers, j.cfg.PS.Consistency.String()
}

// reshards: under bsp, where every worker is at the same step, the
// servers' key ranges are laid anew from the checkpoint's whole vectors
// and the workers are dealt the rest of the epoch (reshard.go).
func (psUnit) reshards(c Config) bool { return c.PS.Consistency == ps.BSP }

func (u psUnit) compatible(j *job, c *checkpoint) string {
	m, cfg := &c.Meta, j.cfg
	need := j.sched.ranks * j.residueFilters()
	switch {
	case m.Servers != cfg.PS.Servers && !u.reshards(cfg):
		return fmt.Sprintf("it was written with %d servers, this job has %d (only bsp resumes on another number)", m.Servers, cfg.PS.Servers)
	case m.Residues != need && m.Workers != j.sched.ranks:
		return fmt.Sprintf("it holds the filter residues of %d workers, this job has %d: resume on %d workers", m.Workers, j.sched.ranks, m.Workers)
	case m.Residues != need:
		return fmt.Sprintf("it holds %d filter residues, this job needs %d", m.Residues, need)
	}
	return u.baseUnit.compatible(j, c)
}

// resume hands every worker its filter residues: entry w*F+f of the
// checkpoint is worker w's residue of its f-th residue filter (compatible
// checked that there are workers × F of them).
func (psUnit) resume(j *job, ck *checkpoint, r *resumed) error {
	r.clock = r.Steps
	if j.cfg.PS.downpour() {
		// The workers' clock counts pushes (downpour.go).
		c := []uint64{0}
		if ck != nil {
			c[0] = uint64(ck.Meta.Pushes)
		}
		if err := collectives.BroadcastUint64(j.Comm, c, 0); err != nil {
			return fmt.Errorf("resuming: the workers' clock: %w", err)
		}
		r.clock = int(c[0])
	}
	perWorker := j.residueFilters()
	if perWorker == 0 {
		return nil
	}
	specs, _ := ps.ParseFilters(j.cfg.PS.Filters)
	buf := make([]float32, len(r.Params))
	for e := range j.sched.ranks * perWorker {
		if ck != nil {
			copy(buf, ck.Residues[e])
		}
		if err := collectives.Broadcast(j.Comm, buf, 0); err != nil {
			return fmt.Errorf("resuming: residues: %w", err)
		}
		w, f := e/perWorker, e%perWorker
		if w != j.shardIdx {
			continue
		}
		if r.residues == nil {
			r.residues = make([][]float32, len(specs))
		}
		// The f-th residue filter's index among all filters.
		for i, k := 0, 0; i < len(specs); i++ {
			if hasResidue(specs[i]) {
				if k == f {
					r.residues[i] = slices.Clone(buf)
				}
				k++
			}
		}
	}
	return nil
}

// run: the servers serve, the workers train the dense model (denseWorker)
// and the reporting worker evaluates the whole test set.
func (psUnit) run(j *job, d denseSetup) (*Result, error) {
	evalAll := func(p []float32) (float64, []float32, error) {
		if err := j.Backend.Upload(d.m.Params, p); err != nil {
			return 0, nil, err
		}
		// The workers' batch-norm statistics, averaged (servers have none).
		state, err := j.syncState(d.m, j.shardIdx >= 0)
		if err != nil {
			return 0, nil, err
		}
		ev, err := evaluateShard(j.Comm, d.m, d.testShard)
		return ev.Accuracy, state, err
	}
	return j.runPS(d.m.Arch, d.params, func(w *ps.Worker) (Strategy, error) {
		testAll, err := d.test.Subset(data.StridedShard(d.testRows, 0, 1))
		if err != nil {
			return nil, err
		}
		return newDenseWorker(j, w, d.m, d.shard, testAll)
	}, evalAll)
}

// runPS is training through the parameter server: ranks below Servers
// serve their key ranges (starting from params) until every worker is done;
// the workers run the loop with the strategy newWorker builds. Then every
// rank takes the final weights from the servers into params, evaluates them
// together with evalAll, and the reporting worker saves them.
func (j *job) runPS(arch model.Arch, params []float32, newWorker func(*ps.Worker) (Strategy, error),
	evalAll func([]float32) (acc float64, buffers []float32, err error)) (*Result, error) {
	start := time.Now()
	cfg, c := j.cfg, j.Comm
	pcfg, err := cfg.psConfig()
	if err != nil {
		return nil, err
	}
	if cfg.Opt.Kind.PerTensor() {
		pcfg.TensorStarts = model.TensorStarts(arch) // each tensor its trust ratio
	}
	res := &Result{Arch: arch, TestAcc: math.NaN()}
	var ws ps.WorkerStats
	samples := 0.0
	start0 := startPosition
	var residues [][]float32
	if r := j.resume; r != nil { // checkpoint.go
		copy(params, r.Params)
		pcfg.Restore = &ps.Restore{OptState: r.Opt, Clock: r.clock}
		start0, residues = r.Position, r.residues
	}
	pcfg.LRAt = j.serverLR(start0) // nil without a schedule
	switch {
	case pcfg.ReplicateEvery < 0: // --replicate-every 0
		pcfg.ReplicateEvery = 0
	case pcfg.ReplicateEvery == 0 && j.keepsLastWord(): // auto: for the last word (lastword_ps.go)
		pcfg.ReplicateEvery = 1
	}
	if c.Rank() < cfg.PS.Servers {
		// A server's timeline: each request received and reply sent.
		sc := trace.Comm(c, trace.OnLane(j.tr, trace.LaneServer))
		var tr ps.Transport = sc
		if j.Stop != nil { // a signal to a server stops the workers too (checkpoint.go)
			n := &stopNotifier{Comm: sc, stop: j.Stop}
			for w := cfg.PS.Servers; w < c.Size(); w++ {
				n.workers = append(n.workers, w)
			}
			tr = n
		}
		keep := j.keepServerWord(arch, len(params), start0)
		st, err := ps.RunServerKeeping(tr, pcfg, params, keep)
		if err != nil {
			return nil, err
		}
		copy(params[st.Range.Lo:st.Range.Hi], st.Weights)
	} else {
		w, err := ps.NewWorker(c, pcfg, len(params))
		if err != nil {
			return nil, err
		}
		if j.resume != nil {
			if err := w.Resume(j.resume.clock, residues); err != nil {
				return nil, err
			}
		}
		s, err := newWorker(w)
		if err != nil {
			return nil, err
		}
		if _, samples, err = j.loop(s, start0, res); err != nil {
			return nil, err
		}
		if err := w.Done(); err != nil {
			return nil, err
		}
		ws = w.Stats()
	}
	for s, rng := range ps.Partition(len(params), cfg.PS.Servers) {
		if err := collectives.Broadcast(c, params[rng.Lo:rng.Hi], s); err != nil {
			return nil, fmt.Errorf("collecting the final weights from server rank %d: %w", s, err)
		}
	}
	if res.TestAcc, res.ModelState, err = evalAll(params); err != nil {
		return nil, err
	}
	if res.PS, res.SamplesPerSec, err = j.runStats(ws, samples, time.Since(start)); err != nil {
		return nil, err
	}
	res.Params = params
	res.WallSec = time.Since(start).Seconds()
	return j.finishRun(res)
}

// psWorker is the bookkeeping every parameter-server worker strategy
// shares: its gradient scale, its wait, its epoch figures. Its loss and
// accuracy are the worker's own samples' (ScopeWorker).
type psWorker struct {
	j    *job
	w    *ps.Worker
	arch model.Arch
	prev ps.WorkerStats
	wait float64 // seconds waited in the current step's Pull

	vote stopVote // the stop vote's state (voteStop)
}

func newPSWorker(j *job, w *ps.Worker, arch model.Arch) psWorker {
	return psWorker{j: j, w: w, arch: arch, prev: w.Stats(),
		vote: stopVote{bsp: j.cfg.PS.Consistency == ps.BSP, workers: j.sched.ranks, me: j.shardIdx}}
}

// scale is the factor a worker's gradient of its summed loss over rows
// samples carries at step `step`. BSP: the server averages the workers'
// pushes, so each is scaled by workers/global batch and the average is the
// global batch's mean gradient, as under AllReduce. SSP, ASP, DSSP: the
// server applies each push as it comes (Downpour), so each carries 1/W of
// this worker's mean gradient: W pushes then move the weights about as far
// as one synchronous step with the same --lr.
func (p *psWorker) scale(rows, step int) float32 {
	workers := p.j.sched.ranks
	if gb := p.bspBatch(step); gb >= 0 {
		return float32(workers) / float32(gb)
	}
	return 1 / float32(max(1, rows)*workers)
}

// bspBatch is the global batch of step under bsp, −1 otherwise.
func (p *psWorker) bspBatch(step int) int {
	if p.j.cfg.PS.Consistency != ps.BSP {
		return -1
	}
	return p.j.globalBatch(step)
}

// sentBytes: the ps worker's pushes and pulls (ps.WorkerStats.BytesSent).
func (p *psWorker) sentBytes() int64 { return p.w.Stats().BytesSent }

// hooks: every worker writes checkpoints (the servers' state), votes on a
// stop among the workers and counts its pushes and pulls.
func (p *psWorker) hooks() hooks {
	return hooks{saveState: p.saveState, voteStop: p.voteStop, sentBytes: p.sentBytes}
}

// hooks: a dense worker's adds its model's state and a re-dealt epoch's
// rows.
func (d *denseWorker) hooks() hooks {
	h := d.psWorker.hooks()
	h.saveState, h.modelState, h.setTrain = d.saveState, d.modelState, d.setTrain
	return h
}

func (p *psWorker) Describe() string {
	cfg := p.j.cfg
	line := fmt.Sprintf("training %s %v on %d samples: %d workers × batch %d, %d server(s), %s, %s server-side",
		cfg.Model, p.arch.Describe(), p.j.sched.n, p.j.sched.ranks, cfg.Batch, cfg.PS.Servers, consistencyLabel(cfg.PS), cfg.Opt.Kind)
	if f, u := cfg.PS.fetchEvery(), cfg.PS.pushEvery(); f > 1 || u > 1 {
		line += fmt.Sprintf(", Downpour: fetch every %d steps, push every %d (local SGD steps in between)", f, u)
	}
	return line
}

func (p *psWorker) Scope() Scope { return ScopeWorker }

// timed runs f (a Pull or Push of n floats) in a span named name and
// returns the seconds it took.
// With a timeline the span carries the worker's clock, the time the
// servers held the call (held_us: the consistency controller's wait, also
// drawn as a "consistency-wait" span inside it) and, for a pull, its
// staleness.
func (p *psWorker) timed(name string, n int, f func() error) (float64, error) {
	sp := p.j.tr.Begin(name).Cat(trace.PS).Bytes(4 * n)
	traced := trace.Enabled(p.j.tr)
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
			trace.Complete(p.j.tr, "consistency-wait", trace.Wait, t1.Add(-min(held, t1.Sub(t0))), t1,
				trace.Arg{Key: "clock", Value: int64(before.Clock)})
		}
	}
	sp.Err(err).End()
	return t1.Sub(t0).Seconds(), err
}

// EndEpoch: the share of the epoch spent waiting in Pull and Push, and the
// worker's parameter-server figures since the last epoch.
func (p *psWorker) EndEpoch(st *EpochStats, commSec, _, wall float64) error {
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
}

func newDenseWorker(j *job, w *ps.Worker, m *model.Model, train, testAll *data.Dense) (*denseWorker, error) {
	np := m.NumParams()
	return &denseWorker{psWorker: newPSWorker(j, w, m.Arch), m: m, train: train, shard: train, testAll: testAll,
		params: make([]float32, np), host: make([]float32, np+model.GradStats), dp: newDownpour(j.cfg.PS, np, j.cfg.Opt.LR)}, nil
}

// setTrain: see hooks.setTrain.
func (d *denseWorker) setTrain(t *data.Dense) {
	if t == nil {
		t = d.shard
	}
	d.train = t
}

func (d *denseWorker) Prepare(idx []int, step int) error {
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
	sp := d.j.tr.Begin("upload").Cat(trace.IO).Bytes(4 * len(d.params))
	err = d.j.Backend.Upload(d.m.Params, d.params)
	sp.Err(err).End()
	if err != nil {
		return err
	}
	sp = d.j.tr.Begin("batch").Cat(trace.IO).Arg("rows", len(idx))
	d.j.loaded(step, d.train, idx, d.bspBatch(step))
	d.rows, err = d.m.LoadBatch(d.train, idx)
	sp.Err(err).End()
	if err != nil {
		return err
	}
	d.sc = d.scale(d.rows, step)
	return nil
}

func (d *denseWorker) Compute() error { return d.m.Step(d.sc, nil) }

// Exchange checks the worker's own gradient for NaN/Inf on its host copy
// and pushes it.
func (d *denseWorker) Exchange(int) (StepStats, error) {
	np := d.m.NumParams()
	grads := d.host
	if hb, ok := d.m.Grads.(kernels.HostBuffer); ok {
		grads = hb.Data()
	} else {
		sp := d.j.tr.Begin("download").Cat(trace.IO).Bytes(4 * len(grads))
		err := d.j.Backend.Download(grads, d.m.Grads)
		sp.Err(err).End()
		if err != nil {
			return StepStats{}, err
		}
	}
	st := StepStats{LossSum: float64(grads[np]), Correct: float64(grads[np+1]), Samples: float64(d.rows)}
	if err := d.arch.CheckFinite(grads[:np], st.LossSum); err != nil {
		return StepStats{}, err
	}
	if c := d.j.cfg.ClipNorm; c > 0 && d.rows > 0 {
		// This worker's own batch's mean gradient (clip.go): the push is
		// it times sc·rows.
		clipHost(grads[:np], 1/(float64(d.sc)*float64(d.rows)), c)
	}
	var push float64
	var err error
	if d.dp != nil {
		push, err = d.downpourStep(grads[:np])
	} else {
		push, err = d.timed("push", np, func() error { return d.w.Push(grads[:np]) })
	}
	st.CommSec = d.wait + push
	return st, err
}

// EndEpoch: under Downpour the epoch's last period ends here: the worker
// pushes what it accumulated and fetches the servers' weights, which the
// epoch's evaluation then measures (downpour.go).
func (d *denseWorker) EndEpoch(st *EpochStats, commSec, stepSec, wall float64) error {
	if d.dp != nil {
		push, err := d.flush()
		if err != nil {
			return err
		}
		pull, err := d.timed("pull", len(d.params), func() error { return d.w.Pull(d.params) })
		if err != nil {
			return err
		}
		d.dp.fetch = false
		if err := d.j.Backend.Upload(d.m.Params, d.params); err != nil {
			return err
		}
		commSec += push + pull
	}
	return d.psWorker.EndEpoch(st, commSec, stepSec, wall)
}

// saveState: under Downpour every worker first pushes what it
// accumulated (and fetches at its next step), so that the servers' state
// the checkpoint takes is the whole of it; the checkpoint records the
// workers' clock (checkpointMeta.Pushes).
func (d *denseWorker) saveState() (*checkpoint, error) {
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
func (d *denseWorker) Evaluate() (EvalResult, error) {
	if !d.j.reports() {
		return notEvaluated, nil
	}
	s, err := d.m.Score(d.testAll)
	if err != nil {
		return EvalResult{}, err
	}
	return sumScores(nil, s)
}

// psDelta is what a worker measured between two snapshots of its stats.
func psDelta(prev, now ps.WorkerStats, wall float64) *PSStats {
	d := &PSStats{
		WaitSec:             now.WaitSeconds - prev.WaitSeconds,
		PushesPerSec:        float64(now.Pushes-prev.Pushes) / wall,
		PullsPerSec:         float64(now.Pulls-prev.Pulls) / wall,
		BytesSent:           now.BytesSent - prev.BytesSent,
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

// runStats combines every worker's statistics (servers contribute zeros):
// the largest staleness, the mean wait, total rates and bytes, and the
// global training throughput.
func (j *job) runStats(ws ps.WorkerStats, samples float64, wall time.Duration) (*PSStats, float64, error) {
	c := j.Comm
	// Counts as integers and seconds as float64 bits: exact, as float32s
	// were not (bytes past 2^24).
	mine := []uint64{uint64(ws.MaxStaleness), math.Float64bits(ws.WaitSeconds), uint64(ws.Pushes), uint64(ws.Pulls),
		uint64(ws.BytesSent), uint64(ws.PushBytes), uint64(ws.PushBytesUnfiltered), math.Float64bits(samples)}
	all, err := collectives.AllgatherUint64(c, mine)
	if err != nil {
		return nil, 0, fmt.Errorf("collecting worker statistics: %w", err)
	}
	sec := wall.Seconds()
	out := &PSStats{}
	var total float64
	for q := j.cfg.PS.Servers; q < c.Size(); q++ {
		v := all[q*len(mine) : (q+1)*len(mine)]
		out.MaxStaleness = max(out.MaxStaleness, int(v[0]))
		out.WaitSec += math.Float64frombits(v[1]) / float64(j.sched.ranks)
		out.PushesPerSec += float64(v[2]) / sec
		out.PullsPerSec += float64(v[3]) / sec
		out.BytesSent += int64(v[4])
		out.PushBytes += int64(v[5])
		out.PushBytesUnfiltered += int64(v[6])
		total += math.Float64frombits(v[7])
	}
	return out, total / sec, nil
}

func consistencyLabel(p PSConfig) string {
	switch p.Consistency {
	case ps.SSP:
		return fmt.Sprintf("ssp (staleness %d)", p.Staleness)
	case ps.DSSP:
		return fmt.Sprintf("dssp (staleness %d..%d)", p.StalenessLow, p.StalenessHigh)
	}
	return p.Consistency.String()
}

// saveState: the reporting worker asks the servers for their state and
// collects the other workers' filter residues; they send theirs.
func (p *psWorker) saveState() (*checkpoint, error) {
	j := p.j
	var mine [][]float32
	for _, f := range p.w.Filters() {
		if r := ps.Residue(f); r != nil {
			mine = append(mine, r)
		}
	}
	if !j.reports() {
		for _, r := range mine {
			if err := collectives.Send(j.Comm, r, j.reporter, tagResidue); err != nil {
				return nil, fmt.Errorf("checkpoint: sending residue to rank %d: %w", j.reporter, err)
			}
		}
		return nil, nil
	}
	n := p.w.Size()
	c := &checkpoint{Meta: checkpointMeta{Arch: p.arch}, State: model.State{Params: make([]float32, n)}}
	if per := j.cfg.Opt.Kind.StatePer(); per > 0 {
		c.Opt = make([]float32, per*n)
	}
	if err := p.w.Snapshot(c.Params, c.Opt); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	for w := 0; w < j.sched.ranks; w++ {
		for f := range mine {
			if w == j.shardIdx {
				c.Residues = append(c.Residues, slices.Clone(mine[f]))
				continue
			}
			r := make([]float32, n)
			if err := collectives.Recv(j.Comm, r, w+j.cfg.PS.Servers, tagResidue); err != nil {
				return nil, fmt.Errorf("checkpoint: residue of worker rank %d: %w", w+j.cfg.PS.Servers, err)
			}
			c.Residues = append(c.Residues, r)
		}
	}
	return c, nil
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
	out := v.begin(local, note)
	for _, w := range out.notes {
		if err := j.Comm.SendBytes([]byte{1}, w+j.cfg.PS.Servers, tagStopNote); err != nil {
			return false, err
		}
	}
	if out.decided {
		return out.stop, nil
	}
	to := j.cfg.Timeout
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
	if !v.gathers() {
		if err := j.Comm.SendBytes(flag(out.flag), j.reporter, tagStop); err != nil {
			return false, err
		}
		b, _, _, err := j.Comm.RecvBytesWithin(j.reporter, tagStop, to)
		if err != nil {
			return false, fmt.Errorf("from the first worker (rank %d): %w", j.reporter, err)
		}
		return len(b) == 1 && b[0] == 1, nil
	}
	flags := make([]bool, 0, v.workers)
	for _, w := range v.others() {
		b, _, _, err := j.Comm.RecvBytesWithin(w+j.cfg.PS.Servers, tagStop, to)
		if err != nil {
			return false, fmt.Errorf("from worker rank %d: %w", w+j.cfg.PS.Servers, err)
		}
		flags = append(flags, len(b) == 1 && b[0] == 1)
	}
	stop := v.combine(out.flag, flags)
	for _, w := range v.others() {
		if err := j.Comm.SendBytes(flag(stop), w+j.cfg.PS.Servers, tagStop); err != nil {
			return false, err
		}
	}
	return stop, nil
}

// stopVote is the ps stop vote's rules on one worker, free of I/O (the
// network is voteStop's): at each step boundary it takes the worker's own
// wish and whether a stop note arrived (from a signalled server, or a
// signalled worker under ssp, asp, dssp) and says whom to notify and,
// unless the workers must agree first (bsp), whether to stop.
type stopVote struct {
	bsp      bool // the workers are in step: the first worker gathers the flags
	workers  int
	me       int  // this worker's index (0: the first worker)
	notified bool // this worker has sent the others its note
}

// voteStep is what a worker does at one boundary.
type voteStep struct {
	notes   []int // workers to send a stop note to
	flag    bool  // this worker's wish, note included (bsp: to the first worker)
	decided bool  // stop is the answer already (not bsp, or one worker)
	stop    bool
}

// begin is the start of the vote at a boundary.
func (v *stopVote) begin(local, note bool) voteStep {
	st := voteStep{flag: local || note}
	if v.bsp && v.workers > 1 {
		return st
	}
	// Not in step: each worker stops at its own next boundary once it is
	// signalled or told, and a signalled worker tells the others once.
	if local && !v.notified && v.workers > 1 {
		v.notified = true
		st.notes = v.others()
	}
	st.decided, st.stop = true, st.flag
	return st
}

// gathers: this worker collects the flags and sends back the answer (bsp).
func (v *stopVote) gathers() bool { return v.me == 0 }

// others are the workers other than this one.
func (v *stopVote) others() []int {
	var out []int
	for w := range v.workers {
		if w != v.me {
			out = append(out, w)
		}
	}
	return out
}

// combine is the gathering worker's answer: stop when any worker wants to.
func (v *stopVote) combine(mine bool, others []bool) bool {
	for _, f := range others {
		mine = mine || f
	}
	return mine
}

// StopVoteWait is how long the ps stop vote waits for a worker, under a
// transport timeout of timeout: a whole timeout longer than a worker's own
// wait for a silent server (ps.ServerWait). A worker the vote waits for
// may itself be held by a server that stopped; its own wait then ends
// first, with room for its polling, and names the server, the cause,
// rather than the vote naming the worker. (With the two equal, either
// could end first: TestStallPSStoppedServer failed so.)
func StopVoteWait(timeout time.Duration) time.Duration { return ps.ServerWait(timeout) + timeout }

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

// stopNotifier is a server rank's transport: before each receive of the
// server loop it asks Stop, and the first time a signal has come it sends
// every worker a stop note (the server itself goes on serving until every
// worker is done). The loop receives at least every Timeout/4.
type stopNotifier struct {
	collectives.Comm
	stop    func() bool
	workers []int
	sent    bool
}

func (s *stopNotifier) RecvBytesWithin(from, tag int, d time.Duration) ([]byte, int, int, error) {
	if !s.sent && s.stop() {
		s.sent = true
		for _, w := range s.workers {
			if err := s.Comm.SendBytes([]byte{1}, w, tagStopNote); err != nil {
				return nil, 0, 0, fmt.Errorf("stop note to worker rank %d: %w", w, err)
			}
		}
	}
	return s.Comm.RecvBytesWithin(from, tag, d)
}

// residueFilters is how many of the job's ps filters keep a residue
// (sigmod), which a checkpoint must carry per worker.
func (j *job) residueFilters() int {
	if j.cfg.Sync != SyncPS {
		return 0
	}
	specs, err := ps.ParseFilters(j.cfg.PS.Filters)
	if err != nil {
		return 0
	}
	n := 0
	for _, f := range specs {
		if hasResidue(f) {
			n++
		}
	}
	return n
}

// hasResidue reports whether filters of spec keep a residue (sigmod).
func hasResidue(spec ps.FilterSpec) bool { return ps.Residue(spec.NewFilter(1)) != nil }
