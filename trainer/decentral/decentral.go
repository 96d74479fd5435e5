// Package decentral is decentralized training: every rank keeps a model
// of its own (LocalModel) and averages it with other ranks' instead of
// combining gradients. DPSGD (sync_dpsgd.go) averages with its graph
// neighbours at every step, ADPSGD (sync_adpsgd.go) pairwise and
// asynchronously; their protocols are package gossip's. LocalModel,
// OwnModelUnit and Run are also what allreduce's local SGD stands on.
// DPSGD and ADPSGD are registry entries (engine.Unit); package trainer
// registers them.
package decentral

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer/ckpt"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/engine"
	"github.com/dml-project/dml/trainer/model"
	"github.com/dml-project/dml/trainer/trace"
)

// Gossip message tags, from the registry's range (collectives.TagGossipBase).
const (
	tagGossip      = collectives.TagGossipBase + iota // dpsgd: a rank's model to a neighbour
	tagGossipCtl                                      // adpsgd: requests, replies' headers, progress and control
	tagGossipModel                                    // adpsgd: a model that follows a header
)

// GossipTest lets tests start the ranks from different models and freeze
// them (no gradient updates: only the averaging moves them), and see each
// rank's own model at the end. Nil fields do nothing.
var GossipTest struct {
	Init   func(rank int, x []float32)
	Frozen bool
	End    func(rank int, x []float32)
}

// OwnModelUnit is the unit of a strategy on which every rank keeps a model
// of its own (a localModel): decentralized, and its checkpoints hold every
// rank's own model and optimizer state (localModel.saveState), handed back
// to each rank on resuming.
type OwnModelUnit struct{ engine.BaseUnit }

func (OwnModelUnit) Decentralized() bool { return true }

// Compatible: one state per rank (the optimizer state is in them), or,
// where the strategy resumes on another number of ranks (dpsgd), one per
// rank of the job that wrote it.
func (OwnModelUnit) Compatible(j *engine.Job, c *ckpt.File) string {
	if c.Meta.RankStates != j.Comm.Size() && c.Meta.RankStates != c.Meta.Ranks {
		return fmt.Sprintf("it holds the models of %d ranks, this job has %d", c.Meta.RankStates, j.Comm.Size())
	}
	for q, st := range c.RankStates {
		if len(st) != len(c.RankStates[0]) {
			return fmt.Sprintf("rank %d's state has %d values, rank 0's %d", q, len(st), len(c.RankStates[0]))
		}
	}
	return ""
}

func (OwnModelUnit) Resume(j *engine.Job, ck *ckpt.File, r *engine.Resumed) error {
	return takeRankState(r, j.Comm, ck)
}

// LocalModel is one rank's own model in decentralized training: the
// weights x on the host (where they are averaged with other ranks'), the
// Model that computes gradients on a copy of them, and the optimizer with
// its local state (momentum, Adagrad accumulators: each rank keeps its
// own, as in Lian et al.'s implementations).
type LocalModel struct {
	Job   *engine.Job
	M     *model.Model
	opt   *model.Optimizer
	train *data.Dense // this rank's training shard, or a re-dealt epoch's part (setTrain)
	shard *data.Dense
	test  *data.Dense // this rank's test shard
	N     int         // this step's batch
	X     []float32   // this rank's model
	// Shared: X is M.Params' own memory (a host backend, dpsgd only).
	Shared bool
	stats  []float32 // the step's loss sum and correct count (device backends)
	keep   []float32 // x while the consensus model is evaluated (shared)
	avg    []float32 // the consensus model x̄ of the last average
	// accum: --accumulate's micro-batches (nil: a step is one batch).
	accum *model.Accumulator
}

func NewLocalModel(j *engine.Job, m *model.Model, train, test *data.Dense, params []float32, share bool) (*LocalModel, error) {
	opt, err := model.NewArchOptimizer(j.Cfg.Opt, j.Backend, m.Arch)
	if err != nil {
		return nil, err
	}
	l := &LocalModel{Job: j, M: m, opt: opt, train: train, shard: train, test: test, stats: make([]float32, model.GradStats), avg: make([]float32, len(params))}
	if GossipTest.Init != nil {
		params = append([]float32(nil), params...)
		GossipTest.Init(j.Comm.Rank(), params)
	}
	if hb, ok := m.Params.(kernels.HostBuffer); ok && share {
		l.X, l.Shared = hb.Data()[:len(params)], true
		copy(l.X, params)
	} else {
		l.X = append([]float32(nil), params...)
		if err := j.Backend.Upload(m.Params, l.X); err != nil {
			opt.Free()
			return nil, err
		}
	}
	if j.Cfg.Accumulate > 1 {
		if l.accum, err = model.NewAccumulator(m, j.Backend, j.Micro, j.Cfg.Accumulate); err != nil {
			l.Free()
			return nil, err
		}
	}
	if own := ownState(j.Resume); own != nil {
		if err := l.restore(own); err != nil {
			l.Free()
			return nil, err
		}
	}
	return l, nil
}

func (l *LocalModel) Free() {
	l.opt.Free()
	l.accum.Free()
}

// setTrain: see Hooks.SetTrain.
// Hooks are the parts every decentralized strategy has from its local
// model: checkpoints, the model's state, a re-dealt epoch's rows.
func (l *LocalModel) Hooks() engine.Hooks {
	return engine.Hooks{SaveState: l.saveState, ModelState: l.modelState, SetTrain: l.setTrain}
}

func (l *LocalModel) setTrain(t *data.Dense) {
	if t == nil {
		t = l.shard
	}
	l.train = t
}

// modelState: the ranks' averaged batch-norm statistics (collective).
func (l *LocalModel) modelState() ([]float32, error) { return l.Job.SyncState(l.M, true) }

// restore sets this rank's model and optimizer state from a checkpoint's
// entry for it (the model, then the optimizer state).
func (l *LocalModel) restore(own []float32) error {
	p, n := len(l.X), l.opt.StateLen()
	if len(own) != p+n {
		return fmt.Errorf("resuming: this rank's checkpointed state has %d values, the model and its optimizer need %d", len(own), p+n)
	}
	copy(l.X, own[:p])
	if !l.Shared {
		if err := l.Job.Backend.Upload(l.M.Params, l.X); err != nil {
			return err
		}
	}
	if n > 0 {
		return l.opt.LoadState(own[p:])
	}
	return nil
}

// DescribeLocal is the start of a decentralized strategy's Describe line.
func (l *LocalModel) DescribeLocal() string {
	cfg, a := l.Job.Cfg, l.M.Arch
	return fmt.Sprintf("training %s %v on %d samples (%d ranks × batch %s), %d params, %s%s",
		cfg.Model, a.Describe(), l.Job.Sched.N, l.Job.Sched.Ranks, l.Job.BatchLabel(), a.NumParams(), cfg.Opt.Kind, l.Job.SyncBNNote())
}

// Scope: each rank reports its own batches.
func (l *LocalModel) Scope() engine.Scope { return engine.ScopeWorker }

// LoadBatch uploads the step's batch (under --accumulate its first
// micro-batch).
func (l *LocalModel) LoadBatch(idx []int) error {
	l.N = len(idx)
	l.Job.Loaded(-1, l.train, idx, -1)
	first := l.accum.First(idx)
	sp := l.Job.Trace.Begin("batch").Cat(trace.IO).Arg("rows", len(first))
	_, err := l.M.LoadBatch(l.train, first)
	sp.Err(err).End()
	return err
}

// Compute leaves the gradient of the mean loss over this rank's batch (the
// ranks' average then moves like one SGD step on the global batch).
func (l *LocalModel) Compute() error {
	return l.M.StepMicro(l.accum, 1/float32(max(1, l.N)), l.train, l.Job.Trace)
}

// StepStats reads the step's loss sum and correct count and checks the
// loss and gradient for NaN/Inf.
func (l *LocalModel) StepStats(n int) (engine.StepStats, error) {
	m, b := l.M, l.Job.Backend
	stats := l.stats
	if hb, ok := m.Grads.(kernels.HostBuffer); ok {
		stats = hb.Data()[m.NumParams():]
	} else if err := b.Download(stats, m.Stats()); err != nil {
		return engine.StepStats{}, err
	}
	st := engine.StepStats{LossSum: float64(stats[0]), Correct: float64(stats[1]), Samples: float64(n)}
	bad, err := b.NonFinite(m.GradView())
	if err != nil {
		return engine.StepStats{}, err
	}
	if bad >= 0 || math.IsNaN(st.LossSum) || math.IsInf(st.LossSum, 0) {
		grads := make([]float32, m.NumParams())
		if err := b.Download(grads, m.GradView()); err != nil {
			return engine.StepStats{}, err
		}
		if err := m.Arch.CheckFinite(grads, st.LossSum); err != nil {
			return engine.StepStats{}, err
		}
		return engine.StepStats{}, fmt.Errorf("non-finite gradient element %d: %w", bad, model.ErrNonFinite)
	}
	return st, nil
}

// Update applies the step's gradient (computed at the model the step
// started from) to x as it is now: x ← x − γ·g for SGD, with the
// optimizer's own rule otherwise.
func (l *LocalModel) Update() error {
	b, m := l.Job.Backend, l.M
	sp := l.Job.Trace.Begin("update").Cat(trace.Update)
	defer sp.End()
	if GossipTest.Frozen {
		return nil
	}
	if !l.Shared {
		if err := b.Upload(m.Params, l.X); err != nil {
			return err
		}
	}
	if c := l.Job.Cfg.ClipNorm; c > 0 { // this rank's own gradient (clip.go)
		if _, err := engine.ClipGrad(b, m.GradView(), c); err != nil {
			return err
		}
	}
	if err := l.opt.Update(m.Params, m.GradView()); err != nil {
		return err
	}
	if !l.Shared {
		return b.Download(l.X, m.Params)
	}
	return nil
}

// consensus averages every rank's x into l.avg (a collective) and returns
// the consensus distance mean_i ‖x_i − x̄‖ / ‖x̄‖.
func (l *LocalModel) consensus() (float64, error) {
	c := l.Job.Comm
	sp := l.Job.Trace.Begin("consensus").Cat(trace.Collective).Bytes(4 * len(l.X))
	defer sp.End()
	if err := l.averageInto(l.avg); err != nil {
		return 0, err
	}
	var d, a float64
	for i, v := range l.X {
		e := float64(v) - float64(l.avg[i])
		d += e * e
		a += float64(l.avg[i]) * float64(l.avg[i])
	}
	dist := []float32{float32(math.Sqrt(d))}
	if err := collectives.Allreduce(c, dist, collectives.Avg, collectives.Tree); err != nil {
		return 0, fmt.Errorf("consensus distance: %w", err)
	}
	return float64(dist[0]) / math.Max(math.Sqrt(a), 1e-30), nil
}

// FillEpoch fills in a lock-step strategy's epoch figures (dpsgd, local
// SGD): the job's samples/s (summed over ranks: the loop measured this
// rank's), the mean share of step time spent communicating, the consensus
// distance, and the reporting rank's averagings and time waiting for them.
func (l *LocalModel) FillEpoch(st *engine.EpochStats, commSec, stepSec, wallSec float64, averagings int, waitSec float64) error {
	fr := []float32{float32(commSec), float32(stepSec), float32(st.SamplesPerSec)}
	if err := collectives.Allreduce(l.Job.Comm, fr, collectives.Sum, collectives.Tree); err != nil {
		return err
	}
	st.CommFraction = float64(fr[0]) / max(float64(fr[1]), 1e-12)
	st.SamplesPerSec = float64(fr[2])
	dist, err := l.consensus()
	if err != nil {
		return err
	}
	st.GossipStats = &engine.GossipStats{Consensus: dist, Averagings: averagings, AveragingsPerSec: float64(averagings) / max(wallSec, 1e-12), PartnerWaitSec: waitSec}
	return nil
}

// averageInto sets dst to the average of every rank's x (a collective).
func (l *LocalModel) averageInto(dst []float32) error {
	copy(dst, l.X)
	if err := collectives.Allreduce(l.Job.Comm, dst, collectives.Avg, l.Job.Cfg.Allreduce); err != nil {
		return fmt.Errorf("averaging the ranks' models: %w", err)
	}
	return nil
}

// EvaluateConsensus measures the test accuracy of the consensus model l.avg over
// every rank's test shard (collective), leaving x as it was.
func (l *LocalModel) EvaluateConsensus() (engine.EvalResult, error) {
	b, m := l.Job.Backend, l.M
	if _, err := l.Job.SyncState(m, true); err != nil {
		return engine.EvalResult{}, err
	}
	if l.Shared {
		l.keep = append(l.keep[:0], l.X...)
	}
	if err := b.Upload(m.Params, l.avg); err != nil {
		return engine.EvalResult{}, err
	}
	acc, err := engine.EvaluateShard(l.Job.Comm, m, l.test)
	if l.Shared {
		copy(l.X, l.keep)
	} else if err == nil {
		err = b.Upload(m.Params, l.X)
	}
	return acc, err
}

// GossipStrategy is a decentralized Strategy (dpsgd, adpsgd) with its
// rank's own model.
type GossipStrategy interface {
	engine.Strategy
	Local() *LocalModel
	Close()
}

// Run trains with the decentralized strategy newStrategy
// builds (dpsgd, adpsgd), then averages the ranks' models: the consensus
// model is the result on every rank (evaluated, and saved by rank 0).
func Run(j *engine.Job, d engine.DenseSetup, newStrategy func() (GossipStrategy, error)) (*engine.Result, error) {
	start := time.Now()
	res := &engine.Result{Arch: d.M.Arch, TestAcc: math.NaN()}
	s, err := newStrategy()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	pos := engine.StartPosition
	if j.Resume != nil {
		pos = j.Resume.Position
	}
	_, samples, err := j.Loop(s, pos, res)
	if err != nil {
		return nil, err
	}
	l := s.Local()
	if GossipTest.End != nil {
		GossipTest.End(j.Comm.Rank(), l.X)
	}
	if _, err := l.consensus(); err != nil {
		return nil, err
	}
	if math.IsNaN(res.TestAcc) {
		ev, err := l.EvaluateConsensus()
		if res.TestAcc = ev.Accuracy; err != nil {
			return nil, err
		}
	}
	res.Params = append([]float32(nil), l.avg...)
	if res.ModelState, err = j.SyncState(d.M, true); err != nil {
		return nil, err
	}
	tot := []float32{float32(samples)}
	if err := collectives.Allreduce(j.Comm, tot, collectives.Sum, collectives.Tree); err != nil {
		return nil, err
	}
	res.WallSec = time.Since(start).Seconds()
	res.SamplesPerSec = float64(tot[0]) / res.WallSec
	return j.FinishRun(res) // ErrInterrupted after a stop (checkpoint.go)
}

// takeRankState hands each rank its own state from the checkpoint rank 0
// read: rank 0 sends rank r its entry, length first. A checkpoint of
// another number of ranks (dpsgd, reshard.go) gives every rank the same
// state: the consensus model (the checkpoint's weights, the ranks'
// average) and the ranks' optimizer states averaged (consensusState).
func takeRankState(r *engine.Resumed, c collectives.Comm, ck *ckpt.File) error {
	if c.Rank() == 0 {
		states := ck.RankStates
		if len(states) != c.Size() {
			one := consensusState(ck.Params, states)
			states = make([][]float32, c.Size())
			for q := range states {
				states[q] = one
			}
		}
		for q := 1; q < c.Size(); q++ {
			st := states[q]
			if err := c.SendBytes(binary.LittleEndian.AppendUint64(nil, uint64(len(st))), q, engine.TagRankState); err != nil {
				return fmt.Errorf("resuming: sending rank %d its model: %w", q, err)
			}
			if err := collectives.Send(c, st, q, engine.TagRankState); err != nil {
				return fmt.Errorf("resuming: sending rank %d its model: %w", q, err)
			}
		}
		r.Own = states[0]
		return nil
	}
	n, _, _, err := c.RecvBytes(0, engine.TagRankState)
	if err == nil && len(n) != 8 {
		err = fmt.Errorf("a length of %d bytes, want 8", len(n))
	}
	if err != nil {
		return fmt.Errorf("resuming: receiving this rank's model: %w", err)
	}
	r.Own = make([]float32, binary.LittleEndian.Uint64(n))
	if err := collectives.Recv(c, r.Own, 0, engine.TagRankState); err != nil {
		return fmt.Errorf("resuming: receiving this rank's model: %w", err)
	}
	return nil
}

// saveState: rank 0 collects every rank's own model and optimizer state;
// the checkpoint's weights are their average, the consensus model.
func (s *LocalModel) saveState() (*ckpt.File, error) {
	c := s.Job.Comm
	mine := slices.Clone(s.X)
	if s.opt.StateLen() > 0 {
		st, err := s.opt.SaveState()
		if err != nil {
			return nil, err
		}
		mine = append(mine, st...)
	}
	avg := make([]float32, len(s.X))
	if err := s.averageInto(avg); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	states, err := engine.GatherAtZero(c, mine, engine.TagRankState, "model")
	if err != nil || c.Rank() != 0 {
		return nil, err
	}
	return &ckpt.File{Meta: ckpt.Meta{Arch: s.M.Arch}, State: model.State{Params: avg}, RankStates: states}, nil
}

// consensusState is the state every rank of another number of ranks
// resumes a decentralized checkpoint from: the consensus model params,
// then each optimizer value averaged over the ranks' states (in float64,
// in rank order) — a departure from the checkpoint's ranks, whose models
// and optimizer states differed; D-PSGD's analysis is of the average
// model, which this keeps.
func consensusState(params []float32, states [][]float32) []float32 {
	p := len(params)
	one := append([]float32(nil), params...)
	if len(states) == 0 || len(states[0]) <= p {
		return one
	}
	for i := p; i < len(states[0]); i++ {
		var s float64
		for _, st := range states {
			s += float64(st[i])
		}
		one = append(one, float32(s/float64(len(states))))
	}
	return one
}

// ownState is this rank's own state to resume from, or nil.
func ownState(r *engine.Resumed) []float32 {
	if r == nil {
		return nil
	}
	return r.Own
}

// SetStep: the rate and count of the step about to run (schedule.go).
func (l *LocalModel) SetStep(lr float32, t int) { l.opt.Config.LR, l.opt.Config.Step = lr, t }
