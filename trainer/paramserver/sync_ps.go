// Package paramserver is the --sync ps strategy: the first ranks serve
// key ranges of the model (package ps), the others train as workers that
// pull weights and push gradients under BSP, SSP, ASP or DSSP. What the
// workers share is ps_worker.go; the dense worker is dense_worker.go
// (with Downpour's state in downpour.go), the
// sparse one (sparse-logreg, keys of each batch) sync_sparse.go, the
// workers' stop vote ps_stopvote.go (its rules in trainer/stopvote), the
// servers' emergency checkpoint lastword_ps.go. Unit is its registry
// entry (engine.Unit); package trainer registers it.
package paramserver

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/ckpt"
	"github.com/dml-project/dml/trainer/config"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/engine"
	"github.com/dml-project/dml/trainer/model"
	"github.com/dml-project/dml/trainer/trace"
)

// Unit is --sync ps: ranks 0..Servers-1 serve their key ranges, the
// others are workers that pull weights and push gradients (psWorker; the
// dense model's denseWorker here, sparse-logreg's sparseWorker in
// sync_sparse.go).
type Unit struct{ engine.BaseUnit }

func (Unit) Help() string { return "parameter server: workers pull weights and push gradients" }
func (Unit) Validate(c engine.Config) error {
	if err := c.PS.Validate(); err != nil {
		return err
	}
	if c.SyncBN && c.PS.Consistency != ps.BSP {
		return config.Bad("SyncBN", "needs the workers to step together: under --consistency %v they do not (use bsp, or --sync allreduce)", c.PS.Consistency)
	}
	if c.Model == engine.SparseLogreg && c.Accumulate > 1 {
		return config.Bad("Accumulate", "%d: sparse-logreg's workers step one batch at a time: give a larger --batch", c.Accumulate)
	}
	if c.Model == engine.SparseLogreg && (c.PS.SparseRows == config.SparseOn || c.PS.SparseRows == config.SparseOff) {
		return config.Bad("PS.SparseRows", "%s: sparse-logreg always pulls and pushes the keys of each batch; --sparse-rows is for the dense models", c.PS.SparseRows)
	}
	return validateDownpour(c)
}
func (Unit) Servers(c engine.Config) int { return c.PS.Servers }

// Foreign: Downpour's intervals and the sparse rows are the parameter
// server's.
func (Unit) Foreign(c engine.Config) error {
	switch {
	case c.PS.SparseRows == config.SparseOn || c.PS.SparseRows == config.SparseOff:
		return config.Bad("PS.SparseRows", "%s: pulling and pushing only the rows a batch reaches is for Config.Sync ps, not %v", c.PS.SparseRows, c.Sync)
	case c.PS.FetchEvery > 1:
		return config.Bad("PS.FetchEvery", "%d: fetching every N steps (Downpour SGD) is for Config.Sync ps, not %v", c.PS.FetchEvery, c.Sync)
	case c.PS.PushEvery > 1:
		return config.Bad("PS.PushEvery", "%d: pushing every N steps (Downpour SGD) is for Config.Sync ps, not %v", c.PS.PushEvery, c.Sync)
	}
	return nil
}

func (Unit) ValidateWorld(c engine.Config, size int) error {
	if c.PS.Servers >= size {
		return config.Bad("PS.Servers", "%d needs at least %d ranks (servers + 1 worker); this job has %d", c.PS.Servers, c.PS.Servers+1, size)
	}
	return nil
}

// Variants: one per consistency model, named by it.
func (Unit) Variants() []engine.Variant {
	var out []engine.Variant
	for _, c := range ps.Consistencies {
		out = append(out, engine.Variant{Name: c.String(), Sync: engine.SyncPS, Consistency: c, Servers: true})
	}
	return out
}

// CheckCheckpointing: a checkpoint holds one residue per worker, taken at
// one step; under ssp, asp and dssp the workers are not at the same step.
func (Unit) CheckCheckpointing(c engine.Config, _ *engine.Checkpointing) error {
	if c.PS.Consistency == ps.BSP {
		return nil
	}
	if specs, err := ps.ParseFilters(c.PS.Filters); err == nil && slices.ContainsFunc(specs, hasResidue) {
		return config.Bad("PS.Filters", "%q: checkpoints keep the sigmod filter's residues only under bsp (under %v the workers are not at the same step)",
			c.PS.Filters, c.PS.Consistency)
	}
	return nil
}

// CheckpointMeta: the servers and the consistency model (Downpour's clock,
// Pushes, is the worker's own, set by its saveState).
func (Unit) CheckpointMeta(j *engine.Job, m *ckpt.Meta) {
	m.Servers, m.Consistency = j.Cfg.PS.Servers, j.Cfg.PS.Consistency.String()
}

// Reshards: under bsp, where every worker is at the same step, the
// servers' key ranges are laid anew from the checkpoint's whole vectors
// and the workers are dealt the rest of the epoch (reshard.go).
func (Unit) Reshards(c engine.Config) bool { return c.PS.Consistency == ps.BSP }

func (u Unit) Compatible(j *engine.Job, c *ckpt.File) string {
	m, cfg := &c.Meta, j.Cfg
	need := j.Sched.Ranks * residueFilters(j)
	switch {
	case m.Servers != cfg.PS.Servers && !u.Reshards(cfg):
		return fmt.Sprintf("it was written with %d servers, this job has %d (only bsp resumes on another number)", m.Servers, cfg.PS.Servers)
	case m.Residues != need && m.Workers != j.Sched.Ranks:
		return fmt.Sprintf("it holds the filter residues of %d workers, this job has %d: resume on %d workers", m.Workers, j.Sched.Ranks, m.Workers)
	case m.Residues != need:
		return fmt.Sprintf("it holds %d filter residues, this job needs %d", m.Residues, need)
	}
	return u.BaseUnit.Compatible(j, c)
}

// Resume hands every worker its filter residues: entry w*F+f of the
// checkpoint is worker w's residue of its f-th residue filter (compatible
// checked that there are workers × F of them).
func (Unit) Resume(j *engine.Job, ck *ckpt.File, r *engine.Resumed) error {
	r.Clock = r.Steps
	if j.Cfg.PS.Downpour() {
		// The workers' clock counts pushes (downpour.go).
		c := []uint64{0}
		if ck != nil {
			c[0] = uint64(ck.Meta.Pushes)
		}
		if err := collectives.BroadcastUint64(j.Comm, c, 0); err != nil {
			return fmt.Errorf("resuming: the workers' clock: %w", err)
		}
		r.Clock = int(c[0])
	}
	perWorker := residueFilters(j)
	if perWorker == 0 {
		return nil
	}
	specs, _ := ps.ParseFilters(j.Cfg.PS.Filters)
	buf := make([]float32, len(r.Params))
	for e := range j.Sched.Ranks * perWorker {
		if ck != nil {
			copy(buf, ck.Residues[e])
		}
		if err := collectives.Broadcast(j.Comm, buf, 0); err != nil {
			return fmt.Errorf("resuming: residues: %w", err)
		}
		w, f := e/perWorker, e%perWorker
		if w != j.ShardIdx {
			continue
		}
		if r.Residues == nil {
			r.Residues = make([][]float32, len(specs))
		}
		// The f-th residue filter's index among all filters.
		for i, k := 0, 0; i < len(specs); i++ {
			if hasResidue(specs[i]) {
				if k == f {
					r.Residues[i] = slices.Clone(buf)
				}
				k++
			}
		}
	}
	return nil
}

// Run: the servers serve, the workers train the dense model (denseWorker)
// and the reporting worker evaluates the whole test set.
func (Unit) Run(j *engine.Job, d engine.DenseSetup) (*engine.Result, error) {
	if j.Cfg.PS.SparseRows == config.SparseOn && d.M.SparseWeights() == 0 {
		// Every rank has the model: every rank stops here, none waits.
		return nil, config.Bad("PS.SparseRows", "on: the network has no rows a batch may leave untouched (an embedding without a tied head, or a position table longer than Config.Data.SeqLen)")
	}
	evalAll := func(p []float32) (float64, []float32, error) {
		if err := j.Backend.Upload(d.M.Params, p); err != nil {
			return 0, nil, err
		}
		// The workers' batch-norm statistics, averaged (servers have none).
		state, err := j.SyncState(d.M, j.ShardIdx >= 0)
		if err != nil {
			return 0, nil, err
		}
		ev, err := engine.EvaluateShard(j.Comm, d.M, d.TestShard)
		return ev.Accuracy, state, err
	}
	if j.Cfg.SyncBN && j.ShardIdx >= 0 { // SyncBatchNorm over the workers, who step together under bsp
		workers := make([]int, 0, j.Comm.Size()-j.Cfg.PS.Servers)
		for r := j.Cfg.PS.Servers; r < j.Comm.Size(); r++ {
			workers = append(workers, r)
		}
		g, err := collectives.NewGroup(j.Comm, workers)
		if err != nil {
			return nil, err
		}
		d.M.SyncBN = func(v []float32) error { return collectives.Allreduce(g, v, collectives.Sum, collectives.Tree) }
		defer func() { d.M.SyncBN = nil }()
	}
	var accum *model.Accumulator
	if j.Cfg.Accumulate > 1 && j.ShardIdx >= 0 { // a worker
		var err error
		if accum, err = model.NewAccumulator(d.M, j.Backend, j.Micro, j.Cfg.Accumulate); err != nil {
			return nil, err
		}
		defer accum.Free()
	}
	return runPS(j, d.M.Arch, d.Params, func(w *ps.Worker) (engine.Strategy, error) {
		testAll, err := d.Test.Subset(data.StridedShard(d.TestRows, 0, 1))
		if err != nil {
			return nil, err
		}
		return newDenseWorker(j, w, d.M, d.Shard, testAll, accum)
	}, evalAll)
}

// runPS is training through the parameter server: ranks below Servers
// serve their key ranges (starting from params) until every worker is done;
// the workers run the loop with the strategy newWorker builds. Then every
// rank takes the final weights from the servers into params, evaluates them
// together with evalAll, and the reporting worker saves them.
func runPS(j *engine.Job, arch model.Arch, params []float32, newWorker func(*ps.Worker) (engine.Strategy, error),
	evalAll func([]float32) (acc float64, buffers []float32, err error)) (*engine.Result, error) {
	start := time.Now()
	cfg, c := j.Cfg, j.Comm
	pcfg, err := cfg.ServerConfig()
	if err != nil {
		return nil, err
	}
	if cfg.Opt.Kind.PerTensor() {
		pcfg.TensorStarts = model.TensorStarts(arch) // each tensor its trust ratio
	}
	res := &engine.Result{Arch: arch, TestAcc: math.NaN()}
	var ws ps.WorkerStats
	samples := 0.0
	start0 := engine.StartPosition
	var residues [][]float32
	if r := j.Resume; r != nil { // checkpoint.go
		copy(params, r.Params)
		pcfg.Restore = &ps.Restore{OptState: r.Opt, Clock: r.Clock}
		start0, residues = r.Position, r.Residues
	}
	pcfg.LRAt = j.ServerLR(start0) // nil without a schedule
	switch {
	case pcfg.ReplicateEvery < 0: // --replicate-every 0
		pcfg.ReplicateEvery = 0
	case pcfg.ReplicateEvery == 0 && j.KeepsLastWord(): // auto: for the last word (lastword_ps.go)
		pcfg.ReplicateEvery = 1
	}
	if c.Rank() < cfg.PS.Servers {
		// A server's timeline: each request received and reply sent.
		sc := trace.Comm(c, trace.OnLane(j.Trace, trace.LaneServer))
		var tr ps.Transport = sc
		if j.Stop != nil { // a signal to a server stops the workers too (checkpoint.go)
			n := &stopNotifier{Comm: sc, stop: j.Stop}
			for w := cfg.PS.Servers; w < c.Size(); w++ {
				n.workers = append(n.workers, w)
			}
			tr = n
		}
		keep := keepServerWord(j, arch, len(params), start0)
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
		if j.Resume != nil {
			if err := w.Resume(j.Resume.Clock, residues); err != nil {
				return nil, err
			}
		}
		s, err := newWorker(w)
		if err != nil {
			return nil, err
		}
		if _, samples, err = j.Loop(s, start0, res); err != nil {
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
	if res.PS, res.SamplesPerSec, err = runStats(j, ws, samples, time.Since(start)); err != nil {
		return nil, err
	}
	res.Params = params
	res.WallSec = time.Since(start).Seconds()
	return j.FinishRun(res)
}

// runStats combines every worker's statistics (servers contribute zeros):
// the largest staleness, the mean wait, total rates and bytes, and the
// global training throughput.
func runStats(j *engine.Job, ws ps.WorkerStats, samples float64, wall time.Duration) (*engine.PSStats, float64, error) {
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
	out := &engine.PSStats{}
	var total float64
	for q := j.Cfg.PS.Servers; q < c.Size(); q++ {
		v := all[q*len(mine) : (q+1)*len(mine)]
		out.MaxStaleness = max(out.MaxStaleness, int(v[0]))
		out.WaitSec += math.Float64frombits(v[1]) / float64(j.Sched.Ranks)
		out.PushesPerSec += float64(v[2]) / sec
		out.PullsPerSec += float64(v[3]) / sec
		out.BytesSent += int64(v[4])
		out.PushBytes += int64(v[5])
		out.PushBytesUnfiltered += int64(v[6])
		total += math.Float64frombits(v[7])
	}
	return out, total / sec, nil
}

// RunSparse trains sparse-logreg through the parameter server.
func (Unit) RunSparse(j *engine.Job, d engine.SparseSetup) (*engine.Result, error) {
	evalAll := func(p []float32) (float64, []float32, error) {
		ev, err := EvaluateSparse(j.Comm, d.Arch, p, d.Test)
		return ev.Accuracy, nil, err
	}
	return runPS(j, d.Arch, d.Params, func(w *ps.Worker) (engine.Strategy, error) {
		return &sparseWorker{psWorker: newPSWorker(j, w, d.Arch), f: d.Train.Cols, train: d.Shard, test: d.Test}, nil
	}, evalAll)
}
