package trainer

import (
	"fmt"
	"math"
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

// runPS is training through the parameter server: ranks below Servers
// serve their key ranges (starting from params) until every worker is done;
// the workers run the loop with the strategy newWorker builds. Then every
// rank takes the final weights from the servers into params, evaluates them
// together with evalAll, and the reporting worker saves them.
func (j *job) runPS(arch model.Arch, params []float32, newWorker func(*ps.Worker) (Strategy, error),
	evalAll func([]float32) (float64, error)) (*Result, error) {
	start := time.Now()
	cfg, c := j.cfg, j.Comm
	pcfg, err := cfg.psConfig()
	if err != nil {
		return nil, err
	}
	res := &Result{Arch: arch, TestAcc: math.NaN()}
	var ws ps.WorkerStats
	samples := 0.0
	start0 := startPosition
	var residues [][]float32
	if r := j.resume; r != nil { // checkpoint.go
		copy(params, r.params)
		pcfg.Restore = &ps.Restore{OptState: r.opt, Clock: r.Steps}
		start0, residues = r.Position, r.residues
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
		st, err := ps.RunServer(tr, pcfg, params)
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
			if err := w.Resume(start0.Steps, residues); err != nil {
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
	if res.TestAcc, err = evalAll(params); err != nil {
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

	notified bool // this worker sent the others its stop note (checkpoint.go)
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
	if p.j.cfg.PS.Consistency == ps.BSP {
		return float32(workers) / float32(p.j.sched.globalBatch(step))
	}
	return 1 / float32(max(1, rows)*workers)
}

func (p *psWorker) Describe() string {
	cfg := p.j.cfg
	return fmt.Sprintf("training %s %v on %d samples: %d workers × batch %d, %d server(s), %s, %s server-side",
		cfg.Model, p.arch.Sizes, p.j.sched.n, p.j.sched.ranks, cfg.Batch, cfg.PS.Servers, consistencyLabel(cfg.PS), cfg.Opt.Kind)
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
	train   *data.Dense // this worker's shard
	testAll *data.Dense // the whole test set (the reporting worker measures it alone)
	params  []float32
	host    []float32 // gradient + stats
	rows    int
	sc      float32
}

func newDenseWorker(j *job, w *ps.Worker, m *model.Model, train, testAll *data.Dense) (*denseWorker, error) {
	np := m.NumParams()
	return &denseWorker{psWorker: psWorker{j: j, w: w, arch: m.Arch, prev: w.Stats()}, m: m, train: train, testAll: testAll,
		params: make([]float32, np), host: make([]float32, np+model.GradStats)}, nil
}

func (d *denseWorker) Prepare(idx []int, step int) error {
	var err error
	if d.wait, err = d.timed("pull", len(d.params), func() error { return d.w.Pull(d.params) }); err != nil {
		return err
	}
	sp := d.j.tr.Begin("upload").Cat(trace.IO).Bytes(4 * len(d.params))
	err = d.j.Backend.Upload(d.m.Params, d.params)
	sp.Err(err).End()
	if err != nil {
		return err
	}
	sp = d.j.tr.Begin("batch").Cat(trace.IO).Arg("rows", len(idx))
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
	push, err := d.timed("push", np, func() error { return d.w.Push(grads[:np]) })
	st.CommSec = d.wait + push
	return st, err
}

// Evaluate measures the whole test set with the weights last pulled, on
// the reporting worker only (the others return NaN).
func (d *denseWorker) Evaluate() (float64, error) {
	if !d.j.reports() {
		return math.NaN(), nil
	}
	s, err := d.m.Score(d.testAll)
	if err != nil {
		return 0, err
	}
	ev, err := sumScores(nil, s)
	return ev.Accuracy, err
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
	mine := []float32{float32(ws.MaxStaleness), float32(ws.WaitSeconds), float32(ws.Pushes), float32(ws.Pulls),
		float32(ws.BytesSent), float32(ws.PushBytes), float32(ws.PushBytesUnfiltered), float32(samples)}
	all := make([]float32, len(mine)*c.Size())
	if err := collectives.Allgather(c, mine, all); err != nil {
		return nil, 0, fmt.Errorf("collecting worker statistics: %w", err)
	}
	sec := wall.Seconds()
	out := &PSStats{}
	var total float64
	for q := j.cfg.PS.Servers; q < c.Size(); q++ {
		v := all[q*len(mine) : (q+1)*len(mine)]
		out.MaxStaleness = max(out.MaxStaleness, int(v[0]))
		out.WaitSec += float64(v[1]) / float64(j.sched.ranks)
		out.PushesPerSec += float64(v[2]) / sec
		out.PullsPerSec += float64(v[3]) / sec
		out.BytesSent += int64(v[4])
		out.PushBytes += int64(v[5])
		out.PushBytesUnfiltered += int64(v[6])
		total += float64(v[7])
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
