package paramserver

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/ckpt"
	"github.com/dml-project/dml/trainer/engine"
	"github.com/dml-project/dml/trainer/model"
	"github.com/dml-project/dml/trainer/stopvote"
	"github.com/dml-project/dml/trainer/trace"
)

// The parameter server's workers: what every worker strategy shares
// (psWorker: its scale, its waits, its checkpoint part, its stop vote).
// The dense model's worker is dense_worker.go, the sparse one
// sync_sparse.go.

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

func (p *psWorker) Describe() string {
	cfg := p.j.Cfg
	line := fmt.Sprintf("training %s %v on %d samples: %d workers × batch %s, %d server(s), %s, %s server-side",
		cfg.Model, p.arch.Describe(), p.j.Sched.N, p.j.Sched.Ranks, p.j.BatchLabel(), cfg.PS.Servers, consistencyLabel(cfg.PS), cfg.Opt.Kind)
	line += p.j.SyncBNNote()
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
		if err := j.Comm.SendBytes([]byte{1}, w+j.Cfg.PS.Servers, engine.TagStopNote); err != nil {
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
		if err := j.Comm.SendBytes(flag(out.Flag), j.Reporter, engine.TagStop); err != nil {
			return false, err
		}
		b, _, _, err := j.Comm.RecvBytesWithin(j.Reporter, engine.TagStop, to)
		if err != nil {
			return false, fmt.Errorf("from the first worker (rank %d): %w", j.Reporter, err)
		}
		return len(b) == 1 && b[0] == 1, nil
	}
	flags := make([]bool, 0, v.Workers)
	for _, w := range v.Others() {
		b, _, _, err := j.Comm.RecvBytesWithin(w+j.Cfg.PS.Servers, engine.TagStop, to)
		if err != nil {
			return false, fmt.Errorf("from worker rank %d: %w", w+j.Cfg.PS.Servers, err)
		}
		flags = append(flags, len(b) == 1 && b[0] == 1)
	}
	stop := v.Combine(out.Flag, flags)
	for _, w := range v.Others() {
		if err := j.Comm.SendBytes(flag(stop), w+j.Cfg.PS.Servers, engine.TagStop); err != nil {
			return false, err
		}
	}
	return stop, nil
}

// pollStopNotes takes every stop note that has arrived, without waiting.
func (p *psWorker) pollStopNotes() (bool, error) {
	got := false
	for {
		_, _, _, err := p.j.Comm.RecvBytesWithin(collectives.AnySource, engine.TagStopNote, 0)
		if errors.Is(err, collectives.ErrTimeout) {
			return got, nil
		}
		if err != nil {
			return got, fmt.Errorf("stop notes: %w", err)
		}
		got = true
	}
}
