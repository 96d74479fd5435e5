// Package allreduce is the --sync allreduce strategy: every rank computes
// its gradient, the ranks sum the gradients by AllReduce (bucketed and
// overlapped with the backward pass: bucket.go; compressed to fp16 or bf16
// with error feedback: compress.go), and every rank takes the same step.
// Its modes: gradient accumulation (model.Accumulator), loss scaling
// (lossscale.go), and local SGD (sync_localsgd.go: each rank steps its own
// model, on decentral's LocalModel, and the models are averaged every
// --local-steps). Unit is its registry entry (engine.Unit); package
// trainer registers it.
package allreduce

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer/ckpt"
	"github.com/dml-project/dml/trainer/config"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/decentral"
	"github.com/dml-project/dml/trainer/engine"
	"github.com/dml-project/dml/trainer/model"
	"github.com/dml-project/dml/trainer/trace"
)

// allreduceStrategy is synchronous data-parallel SGD: each rank computes
// the gradient of its share of the global batch, scaled by 1/global batch,
// and one AllReduce sums the gradients together with each rank's loss sum
// and correct count (the model writes them into the two slots after the
// gradient); every rank then applies the same update to the same weights.
// Its loss and accuracy are the global batch's (ScopeGlobal).
//
// The AllReduce runs bucket by bucket (bucketPlan, --bucket-mb). Where the
// gradient is host memory and there are ranks to talk to, a communication
// goroutine (overlapper) reduces each bucket as soon as the backward pass
// completes its layers, while the backward pass of the earlier layers goes
// on; otherwise (--overlap=false, or a device backend, whose gradient is
// downloaded first) Exchange reduces the same buckets one after another,
// with the same result bit for bit.
type allreduceStrategy struct {
	j           *engine.Job
	m           *model.Model
	opt         *model.Optimizer
	ar          *collectives.Allreducer
	ls          *lossScaler        // --loss-scale (lossscale.go); nil: none
	train, test *data.Dense        // this rank's shards (train: a re-dealt epoch's part, setTrain)
	shard       *data.Dense        // this rank's training shard
	gb          int                // the current step's global batch
	accum       *model.Accumulator // --accumulate; nil: a step is one batch

	plan        []bucket
	wire        *gradWire    // --compress (nil: float32)
	ov          *overlapper  // nil: the buckets are reduced in Exchange
	ovTr        trace.Tracer // the communication goroutine's lane
	backwardEnd time.Time    // when this step's backward pass ended (overlap)
	hiddenSec   float64      // this epoch's AllReduce time hidden behind backward passes

	// On a backend whose buffers are not host memory (a GPU):
	//   - one rank: the gradient never leaves the device (the AllReduce of
	//     one buffer is the buffer itself); the step reads the two stats
	//     slots and checks the gradient with one NonFinite on the device;
	//   - more ranks: host holds the gradient and stats for the AllReduce,
	//     pinned memory from the backend's HostAlloc when it has one; with
	//     an AsyncDownloader too, each layer's gradient is queued for
	//     download as the backward pass completes it (the copies overlap the
	//     rest of the backward pass) and Exchange waits for them.
	host    []float32
	freeH   func([]float32) error // frees a pinned host (nil: not pinned)
	oneRank bool
	async   kernels.AsyncDownloader
	queued  int // Grads[queued:] is queued for download in this step
}

// Unit is --sync allreduce: every rank trains (allreduceStrategy).
type Unit struct{ engine.BaseUnit }

func (Unit) Help() string                { return "gradients summed by AllReduce every step" }
func (Unit) TakesTrainState() bool       { return true }
func (Unit) Reshards(engine.Config) bool { return true }
func (Unit) Variants() []engine.Variant  { return engine.OneVariant(engine.SyncAllreduce) }

// Validate: local SGD (each rank steps its own model, models averaged)
// takes none of the settings of one summed step; --compress and
// --error-feedback are the AllReduce's.
func (Unit) Validate(c engine.Config) error {
	if c.LocalSteps > 1 {
		switch {
		case c.Compresses():
			return config.Bad("Compress", "%s: compresses gradients; with --local-steps %d the models are averaged, in fp32", c.Compress, c.LocalSteps)
		case c.Model == engine.SparseLogreg:
			return config.Bad("LocalSteps", "%d: sparse-logreg trains with --sync ps", c.LocalSteps)
		case c.Accumulate > 1:
			return config.Bad("Accumulate", "%d: with --local-steps %d each rank steps its own model: give a larger --batch", c.Accumulate, c.LocalSteps)
		}
	}
	switch {
	case c.Accumulate > 1 && c.Model == engine.SparseLogreg:
		return config.Bad("Accumulate", "%d: sparse-logreg trains with --sync ps", c.Accumulate)
	case c.SyncBN && c.LocalSteps > 1:
		return config.Bad("SyncBN", "with --local-steps %d each rank steps its own model: batch statistics over the ranks need a step every rank takes together", c.LocalSteps)
	}
	if ls, _ := parseLossScale(c.LossScale); ls != nil && c.LocalSteps > 1 {
		return lossScaleRefused(c)
	}
	switch {
	case c.ErrorFeedback && !c.Compresses():
		return config.Bad("ErrorFeedback", "feeds back what --compress rounds off: give --compress fp16, bf16 or auto")
	case c.Compresses() && c.Allreduce != collectives.Auto && c.Allreduce != collectives.Ring:
		return config.Bad("Compress", "%s: compressed buckets travel on the ring (--allreduce ring or auto, not %s)", c.Compress, c.Allreduce)
	}
	return nil
}

// Foreign: local SGD, compression and loss scaling are the AllReduce's
// (gradient accumulation is every strategy's, model.Accumulator; SyncBN
// every strategy's with a step all ranks take together, whose units
// refuse it otherwise).
func (Unit) Foreign(c engine.Config) error {
	switch {
	case c.LocalSteps > 1 && c.Sync == engine.SyncPS:
		return config.Bad("LocalSteps", "%d: local SGD averages models by AllReduce (--sync allreduce); under --sync ps use --push-every and --fetch-every", c.LocalSteps)
	case c.LocalSteps > 1:
		return config.Bad("LocalSteps", "%d: local SGD is --sync allreduce's (%v averages models its own way)", c.LocalSteps, c.Sync)
	}
	if c.Compresses() || c.ErrorFeedback {
		f, v := "Compress", c.Compress
		if !c.Compresses() {
			f, v = "ErrorFeedback", "true"
		}
		if c.Sync == engine.SyncPS {
			return config.Bad(f, "%s: compresses the AllReduce (--sync allreduce); --sync ps compresses its pushes with --filters fp16, bf16 or sigmod:T", v)
		}
		return config.Bad(f, "%s: compresses the AllReduce (--sync allreduce), not %v's model averaging", v, c.Sync)
	}
	if ls, _ := parseLossScale(c.LossScale); ls != nil {
		return lossScaleRefused(c)
	}
	return nil
}

// lossScaleRefused: loss scaling needs every rank to step from one summed
// gradient.
func lossScaleRefused(c engine.Config) error {
	return config.Bad("LossScale", "%s: loss scaling (on by default with --precision fp16) runs under sync allreduce without local SGD, where every rank steps from the same summed gradient and so skips an overflowing step alike (here: sync %v, local steps %d); use --precision bf16, which needs no scaling, or --loss-scale off", c.LossScale, c.Sync, c.LocalSteps)
}

// Resume hands each rank its error-feedback residue: its own when the
// checkpoint holds one per rank of this job; on another number of ranks
// rank 0 takes their sum (what the ranks' next AllReduce would have
// added in) and the others start from zero.
func (Unit) Resume(j *engine.Job, ck *ckpt.File, r *engine.Resumed) error {
	if j.Cfg.LocalSteps > 1 {
		return decentral.OwnModelUnit{}.Resume(j, ck, r)
	}
	if !j.Cfg.ErrorFeedback {
		return nil
	}
	var count int
	if ck != nil {
		count = len(ck.Residues)
	}
	v := []float32{float32(count)}
	if err := collectives.Broadcast(j.Comm, v, 0); err != nil {
		return fmt.Errorf("resuming: residues: %w", err)
	}
	if count = int(v[0]); count == 0 {
		return nil
	}
	n, size := len(r.Params), j.Comm.Size()
	buf := make([]float32, n)
	mine := make([]float32, n)
	for e := range count {
		if ck != nil {
			copy(buf, ck.Residues[e])
		}
		if err := collectives.Broadcast(j.Comm, buf, 0); err != nil {
			return fmt.Errorf("resuming: residues: %w", err)
		}
		switch {
		case count == size && e == j.Comm.Rank():
			copy(mine, buf)
		case count != size && j.Comm.Rank() == 0:
			for i, x := range buf {
				mine[i] += x
			}
		}
	}
	r.Residues = [][]float32{mine}
	return nil
}

func (Unit) Run(j *engine.Job, d engine.DenseSetup) (*engine.Result, error) {
	if j.Cfg.LocalSteps > 1 || LocalSGDTest {
		if j.Start != nil {
			return nil, fmt.Errorf("Trainer.Start: local SGD (--local-steps %d) keeps a model per rank: resume it from its checkpoint", j.Cfg.LocalSteps)
		}
		return decentral.Run(j, d, func() (decentral.GossipStrategy, error) { return newLocalSGD(j, d) })
	}
	return runAllreduce(j, d.M, d.Params, d.Shard, d.TestShard)
}

// Compatible: under local SGD every rank's own state (ownModelUnit).
func (u Unit) Compatible(j *engine.Job, c *ckpt.File) string {
	if j.Cfg.LocalSteps > 1 {
		return decentral.OwnModelUnit{}.Compatible(j, c)
	}
	return u.BaseUnit.Compatible(j, c)
}

// OneRankOnDevice lets a one-rank world on a device backend keep its
// gradient on the device (tests turn it off to compare with the round
// trip).
var OneRankOnDevice = true

// runAllreduce trains with allreduceStrategy from params (or Trainer.Start).
func runAllreduce(j *engine.Job, m *model.Model, params []float32, train, test *data.Dense) (*engine.Result, error) {
	cfg := j.Cfg
	opt, err := model.NewArchOptimizer(cfg.Opt, j.Backend, m.Arch)
	if err != nil {
		return nil, err
	}
	defer opt.Free()
	s := &allreduceStrategy{j: j, m: m, opt: opt, ar: collectives.NewAllreducer(j.Comm, cfg.Allreduce), train: train, shard: train, test: test}
	if s.ls, err = parseLossScale(cfg.LossScale); err != nil {
		return nil, err
	}
	if cfg.SyncBN { // SyncBatchNorm: the statistics summed over the ranks, in order
		m.SyncBN = func(v []float32) error { return collectives.Allreduce(j.Comm, v, collectives.Sum, collectives.Tree) }
		defer func() { m.SyncBN = nil }()
	}
	if cfg.Accumulate > 1 {
		if s.accum, err = model.NewAccumulator(m, j.Backend, j.Micro, cfg.Accumulate); err != nil {
			return nil, err
		}
		defer s.accum.Free()
	}
	// Every rank built the same model (CheckSameConfig), so the gradient
	// lengths agree: no need to check them again at every step.
	s.ar.SkipLengthCheck = true
	s.plan = bucketPlan(m.Arch, cfg.BucketBytes)
	if s.wire, err = newGradWire(j, s.ar, s.plan, m.NumParams()); err != nil {
		return nil, err
	}
	if s.wire != nil {
		s.ar.Wire = s.wire.wire
		if r := j.Resume; r != nil && len(r.Residues) == 1 && s.wire.residue != nil {
			copy(s.wire.residue, r.Residues[0])
		}
	}
	_, hostGrads := m.Grads.(kernels.HostBuffer)
	// Under SyncBN the backward pass runs collectives of its own: the
	// buckets wait for it.
	if hostGrads && cfg.Overlap && !cfg.SyncBN && j.Comm.Size() > 1 {
		s.ovTr = trace.OnLane(j.Trace, trace.LaneComm)
		s.ov = newOverlapper(s.reduceBucket, s.plan)
		defer s.ov.close()
	}
	if !hostGrads {
		n := m.NumParams() + model.GradStats
		switch ha, pin := j.Backend.(kernels.HostAllocator); {
		case j.Comm.Size() == 1 && OneRankOnDevice:
			s.oneRank = true
			s.host = make([]float32, n) // for the stats, and to name bad layers
		case pin:
			if s.host, err = ha.HostAlloc(n); err != nil {
				return nil, fmt.Errorf("allocating the gradient's pinned host buffer (%d floats): %w", n, err)
			}
			s.freeH = ha.HostFree
			defer func() { _ = s.freeH(s.host) }()
			s.async, _ = j.Backend.(kernels.AsyncDownloader)
		default:
			s.host = make([]float32, n)
		}
	}
	pos, err := startFrom(j, m, opt, params)
	if err != nil {
		return nil, err
	}
	j.KeepLastWord(m.Arch, m.Params, opt.StateBuffer(), m.State, pos)

	start := time.Now()
	res := &engine.Result{Arch: m.Arch, TestAcc: math.NaN()}
	pos, total, err := j.Loop(s, pos, res)
	if err != nil {
		return nil, err
	}
	if math.IsNaN(res.TestAcc) {
		ev, err := s.Evaluate()
		if res.TestAcc = ev.Accuracy; err != nil {
			return nil, err
		}
	}
	if err := fillResult(j, res, m, opt, pos); err != nil {
		return nil, err
	}
	res.WallSec = time.Since(start).Seconds()
	res.SamplesPerSec = total / res.WallSec
	return j.FinishRun(res)
}

// startFrom puts the state training starts from on the backend: the
// checkpoint resumed, or Trainer.Start, or params at the first step; it
// returns the position.
func startFrom(j *engine.Job, m *model.Model, opt *model.Optimizer, params []float32) (engine.Position, error) {
	pos := engine.StartPosition
	st := j.Start
	if r := j.Resume; r != nil {
		st = &engine.TrainState{Arch: m.Arch, State: model.State{Params: r.Params, Opt: r.Opt}, Position: r.Position}
	}
	if st != nil {
		if err := st.Check(m.Arch, opt.StateLen()); err != nil {
			return pos, err
		}
		if j.Resume == nil && len(st.Reshard) > 0 {
			// Trainer.Start hands a state over on as many ranks as ran
			// it; an epoch re-dealt to them is a checkpoint's to record.
			return pos, fmt.Errorf("Trainer.Start: the state is inside an epoch re-dealt to another number of ranks (Position.Reshard): resume it from its checkpoint")
		}
		params, pos = st.Params, st.Position
		if err := opt.LoadState(st.Opt); err != nil {
			return pos, err
		}
		// A checkpoint's statistics are on the device already (run);
		// a Trainer.Start state brings its own.
		if j.Resume == nil && len(st.Buffers) > 0 {
			if err := j.Backend.Upload(m.State, st.Buffers); err != nil {
				return pos, err
			}
		}
	}
	return pos, j.Backend.Upload(m.Params, params)
}

// fillResult records the final weights, optimizer state and the ranks'
// averaged batch-norm statistics in res (collective), and the state to
// go on from at pos.
func fillResult(j *engine.Job, res *engine.Result, m *model.Model, opt *model.Optimizer, pos engine.Position) error {
	res.Params = make([]float32, m.NumParams())
	if err := j.Backend.Download(res.Params, m.Params); err != nil {
		return err
	}
	optState, err := opt.SaveState()
	if err != nil {
		return err
	}
	if res.ModelState, err = j.SyncState(m, true); err != nil {
		return err
	}
	res.State = &engine.TrainState{Arch: m.Arch, State: model.State{Params: slices.Clone(res.Params), Opt: optState,
		Buffers: slices.Clone(res.ModelState)}, Position: pos}
	return nil
}

func (s *allreduceStrategy) Hooks() engine.Hooks {
	return engine.Hooks{SaveState: s.saveState, ModelState: s.modelState, SentBytes: s.sentBytes, SetTrain: s.setTrain}
}

func (s *allreduceStrategy) Describe() string {
	cfg, a := s.j.Cfg, s.m.Arch
	how := "after the backward pass"
	if s.ov != nil {
		how = "overlapped with the backward pass"
	}
	if w := s.wire; w != nil {
		how += ", gradients in " + w.wire.String()
		if w.residue != nil {
			how += " with error feedback"
		}
		if w.note != "" {
			how += " (" + w.note + ")"
		}
	}
	batch := s.j.BatchLabel()
	return fmt.Sprintf("training %s %v on %d samples (%d ranks × batch %s), %d params, %s, allreduce %s in %d bucket(s) %s%s, backend %s",
		cfg.Model, a.Describe(), s.j.Sched.N, s.j.Sched.Ranks, batch, a.NumParams(), cfg.Opt.Kind, cfg.Allreduce,
		len(s.plan), how, s.j.SyncBNNote(), kernels.Describe(s.j.Backend))
}

func (s *allreduceStrategy) Scope() engine.Scope { return engine.ScopeGlobal }

func (s *allreduceStrategy) sentBytes() int64 { return s.ar.Sent }

// Compute leaves 1/gb × the gradient of this rank's summed loss in Grads
// (times the loss scale, with --loss-scale): the sum over ranks is then
// the gradient of the mean loss over the global batch, exact for a
// partial last batch too.
func (s *allreduceStrategy) Compute() error {
	scale := 1 / float32(s.gb) * s.ls.factor()
	if err := s.accum.Earlier(scale, s.train, s.j.Trace); err != nil {
		return err
	}
	if s.ov != nil {
		s.ov.start(s.m.Grads.(kernels.HostBuffer).Data())
		err := s.m.Step(scale, s.accum.Wrap(s.ov.hook))
		s.backwardEnd = time.Now()
		return s.accum.Finish(err)
	}
	if s.async == nil {
		return s.accum.Finish(s.m.Step(scale, s.accum.Wrap(nil)))
	}
	s.queued = len(s.host)
	return s.accum.Finish(s.m.Step(scale, s.accum.Wrap(s.downloadLayer)))
}

// downloadLayer is the gradient hook of a step on an AsyncDownloader: it
// queues the download of what became final since its last call (layer's
// gradient; at the first call, the last layer's and the stats slots).
func (s *allreduceStrategy) downloadLayer(_, lo, _ int) error {
	if lo >= s.queued {
		return nil
	}
	err := s.async.DownloadAsync(s.host[lo:s.queued], s.j.Backend.View(s.m.Grads, lo, s.queued-lo))
	s.queued = lo
	return err
}

// Prepare uploads the batch (features and labels in one piece).
func (s *allreduceStrategy) Prepare(idx []int, step int) error {
	s.gb = s.j.GlobalBatch(step)
	if s.wire != nil {
		s.ar.Scale = wireScale(s.gb)
	}
	s.j.Loaded(step, s.train, idx, s.gb)
	first := s.accum.First(idx)
	sp := s.j.Trace.Begin("batch").Cat(trace.IO).Arg("rows", len(first))
	_, err := s.m.LoadBatch(s.train, first)
	sp.Err(err).End()
	return err
}

// setTrain: see Hooks.SetTrain.
func (s *allreduceStrategy) setTrain(d *data.Dense) {
	if d == nil {
		d = s.shard
	}
	s.train = d
}

// Exchange sums the gradient and statistics over the ranks, checks the
// reduced gradient for NaN/Inf on the host copy (every rank sees the same
// values, so every rank stops at the same step) and updates the weights.
func (s *allreduceStrategy) Exchange(int) (engine.StepStats, error) {
	m, b := s.m, s.j.Backend
	np := m.NumParams()
	if s.oneRank {
		return s.exchangeOne()
	}
	buf, err := s.hostGrads()
	if err != nil {
		return engine.StepStats{}, err
	}
	if s.host == nil {
		return s.exchangeBuckets(buf)
	}
	tr := s.j.Trace
	t0 := time.Now()
	for i, bk := range s.plan {
		if err := s.reduceBucket(i, buf[bk.lo:bk.hi]); err != nil {
			return engine.StepStats{}, err
		}
	}
	comm := time.Since(t0).Seconds()
	sp := tr.Begin("upload").Cat(trace.IO).Bytes(4 * len(buf))
	err = b.Upload(m.Grads, buf)
	sp.Err(err).End()
	if err != nil {
		return engine.StepStats{}, err
	}
	st := engine.StepStats{LossSum: float64(buf[np]), Correct: float64(buf[np+1]), Samples: float64(s.gb), CommSec: comm}
	if err := m.Arch.CheckFinite(buf[:np], st.LossSum); err != nil {
		return s.skip(st, err)
	}
	return st, s.update()
}

// skip ends a step whose reduced gradient or loss is not finite (cause
// says where): with dynamic loss scaling the step is skipped, on every
// rank alike, and the scale halved; otherwise cause ends the run.
func (s *allreduceStrategy) skip(st engine.StepStats, cause error) (engine.StepStats, error) {
	if s.ls == nil {
		return engine.StepStats{}, cause
	}
	if err := s.ls.overflow(cause); err != nil {
		return engine.StepStats{}, err
	}
	return skippedStats(st), nil
}

// update applies the optimizer to the whole reduced gradient (guarded).
func (s *allreduceStrategy) update() error {
	return s.guarded(func() error {
		sp := s.j.Trace.Begin("update").Cat(trace.Update)
		err := s.opt.Update(s.m.Params, s.m.GradView())
		sp.Err(err).End()
		return err
	})
}

// guarded runs apply, the update of the whole reduced gradient, as every
// whole-gradient update is run: the gradient divided by the loss scale
// and clipped first, apply inside the last word's fences (lastword.go),
// and the loss scaler told of a finite step after.
func (s *allreduceStrategy) guarded(apply func() error) error {
	if err := s.ls.unscale(s.j.Backend, s.m.GradView()); err != nil {
		return err
	}
	if err := s.clip(); err != nil {
		return err
	}
	if s.j.LW != nil {
		s.j.LW.BeginUpdate()
	}
	err := apply()
	if s.j.LW != nil {
		s.j.LW.EndUpdate(err)
	}
	if err == nil {
		s.ls.finite()
	}
	return err
}

// exchangeBuckets is Exchange where the gradient is the backend's own host
// memory: bucket by bucket, in the plan's order, it takes the bucket's sum
// (from the communication goroutine, or reducing it here), checks it for
// NaN/Inf and updates the bucket's weights, so that with overlap the update
// of one bucket runs while the next is still being reduced. The first
// bucket carries the loss and correct count.
//
// Unlike one update after the whole AllReduce, a step that finds a NaN in
// a later bucket has already updated the earlier buckets' weights; the
// step fails and the run ends with nothing saved, so no result shows it.
func (s *allreduceStrategy) exchangeBuckets(buf []float32) (engine.StepStats, error) {
	m := s.m
	np := m.NumParams()
	var st engine.StepStats
	var busy, hidden time.Duration
	for i, bk := range s.plan {
		if s.ov != nil {
			d, err := s.ov.wait()
			if err != nil {
				return engine.StepStats{}, err
			}
			busy += d.t1.Sub(d.t0)
			hidden += hiddenPart(d.t0, d.t1, s.backwardEnd)
		} else {
			t0 := time.Now()
			err := s.reduceBucket(i, buf[bk.lo:bk.hi])
			busy += time.Since(t0)
			if err != nil {
				return engine.StepStats{}, err
			}
		}
		if i == 0 {
			st = engine.StepStats{LossSum: float64(buf[np]), Correct: float64(buf[np+1]), Samples: float64(s.gb)}
		}
		hi := min(bk.hi, np)
		if ok, err := s.finite(bk.lo, hi, st.LossSum); err != nil {
			return engine.StepStats{}, err
		} else if !ok {
			// Let the later buckets' sums arrive (the buffer is then
			// the communication goroutine's no more), and name the bad
			// layers in the whole reduced gradient.
			for j := i + 1; s.ov != nil && j < len(s.plan); j++ {
				if _, err := s.ov.wait(); err != nil {
					return engine.StepStats{}, err
				}
			}
			cause := m.Arch.CheckFinite(buf[:np], st.LossSum)
			if cause == nil {
				cause = fmt.Errorf("non-finite value in gradient bucket %d, finite in the whole gradient: %w", i, model.ErrNonFinite)
			}
			st.CommSec = busy.Seconds()
			return s.skip(st, cause)
		}
		if !s.deferUpdates() {
			if err := s.updateBucket(i); err != nil {
				return engine.StepStats{}, err
			}
		}
	}
	st.CommSec = busy.Seconds()
	s.hiddenSec += hidden.Seconds()
	if s.deferUpdates() {
		// Keeping the last word, the buckets are updated after the last
		// one's sum has arrived, inside its fences: a rank stuck in a
		// bucket's AllReduce has updated none (lastword.go). The same
		// element-wise updates: the same bits. Clipping needs the whole
		// gradient's norm first, loss scaling the whole gradient's
		// check.
		err := s.guarded(func() error {
			for i := range s.plan {
				if err := s.updateBucket(i); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return engine.StepStats{}, err
		}
	}
	return st, nil
}

// deferUpdates: the buckets are updated once every sum has arrived (for
// the last word, to clip by the whole gradient's norm, or to skip a step
// whose gradient overflows anywhere under loss scaling), not one by one.
func (s *allreduceStrategy) deferUpdates() bool {
	return s.j.LW != nil || s.j.Cfg.ClipNorm > 0 || s.ls != nil
}

// clip clips the reduced gradient to --clip-norm (clip.go): the same on
// every rank.
func (s *allreduceStrategy) clip() error {
	if s.j.Cfg.ClipNorm <= 0 {
		return nil
	}
	_, err := engine.ClipGrad(s.j.Backend, s.m.GradView(), s.j.Cfg.ClipNorm)
	return err
}

// SetStep: the rate and count of the step about to run (schedule.go).
func (s *allreduceStrategy) SetStep(lr float32, t int) { s.opt.Config.LR, s.opt.Config.Step = lr, t }

// updateBucket applies the optimizer to bucket i's weights.
func (s *allreduceStrategy) updateBucket(i int) error {
	bk, np := s.plan[i], s.m.NumParams()
	hi := min(bk.hi, np)
	sp := s.j.Trace.Begin("update").Cat(trace.Update).Arg("bucket", i)
	err := s.opt.UpdateRange(s.m.Params, s.m.Grads, bk.lo, hi-bk.lo)
	sp.Err(err).End()
	return err
}

// finite says whether the loss and the reduced gradient's piece
// Grads[lo:hi] are free of NaN and ±Inf; every rank sees the same values,
// so every rank stops at the same step. The backend's NonFinite scans the
// piece (vectorised on the CPU backends, on one goroutine: the ranks
// already hold every core).
func (s *allreduceStrategy) finite(lo, hi int, lossSum float64) (bool, error) {
	if math.IsNaN(lossSum) || math.IsInf(lossSum, 0) {
		return false, nil
	}
	bad, err := s.j.Backend.NonFinite(s.j.Backend.View(s.m.Grads, lo, hi-lo))
	return bad < 0, err
}

// hostGrads returns the gradient (and its GradStats slots) in host memory:
// the backend's own buffer when it is host memory, else a downloaded copy.
func (s *allreduceStrategy) hostGrads() ([]float32, error) {
	if hb, ok := s.m.Grads.(kernels.HostBuffer); ok {
		return hb.Data(), nil
	}
	sp := s.j.Trace.Begin("download").Cat(trace.IO).Bytes(4 * len(s.host))
	var err error
	if s.async != nil {
		// The hook queued every layer (the first layer's gradient starts at
		// 0); whatever it did not is downloaded here.
		err = s.async.WaitDownloads()
		if err == nil && s.queued > 0 {
			err = s.j.Backend.Download(s.host[:s.queued], s.j.Backend.View(s.m.Grads, 0, s.queued))
		}
	} else {
		err = s.j.Backend.Download(s.host, s.m.Grads)
	}
	sp.Err(err).End()
	return s.host, err
}

// exchangeOne is Exchange for a world of one rank on a device backend: the
// AllReduce of one buffer is the buffer itself (collectives returns at
// once for one rank, for every algorithm), so the gradient stays where the
// update reads it, bit for bit what a download, a no-op AllReduce and an
// upload would leave. The step reads the two stats slots, and checks the
// gradient with one NonFinite on the device; only when that finds a bad
// value is the gradient downloaded, to name the layers.
func (s *allreduceStrategy) exchangeOne() (engine.StepStats, error) {
	m, b, tr := s.m, s.j.Backend, s.j.Trace
	np := m.NumParams()
	stats := s.host[np:]
	sp := tr.Begin("download").Cat(trace.IO).Bytes(4 * len(stats))
	err := b.Download(stats, m.Stats())
	sp.Err(err).End()
	if err != nil {
		return engine.StepStats{}, err
	}
	st := engine.StepStats{LossSum: float64(stats[0]), Correct: float64(stats[1]), Samples: float64(s.gb)}
	bad, err := b.NonFinite(m.GradView())
	if err != nil {
		return engine.StepStats{}, err
	}
	grads := s.host[:np] // zeros (finite) unless downloaded here
	if bad >= 0 {
		if err := b.Download(grads, m.GradView()); err != nil {
			return engine.StepStats{}, err
		}
		cause := m.Arch.CheckFinite(grads, st.LossSum)
		if cause == nil {
			cause = fmt.Errorf("non-finite gradient element %d on the device, finite in its download: %w", bad, model.ErrNonFinite)
		}
		return s.skip(st, cause)
	}
	if math.IsNaN(st.LossSum) || math.IsInf(st.LossSum, 0) {
		return s.skip(st, m.Arch.CheckFinite(grads, st.LossSum))
	}
	return st, s.update()
}

// EndEpoch: the share of step time spent in the AllReduce, and the share
// of that hidden behind the backward pass, from the means over ranks.
func (s *allreduceStrategy) EndEpoch(st *engine.EpochStats, commSec, stepSec, _ float64) error {
	fr := []float32{float32(commSec), float32(stepSec), float32(s.hiddenSec)}
	s.hiddenSec = 0
	if err := collectives.Allreduce(s.j.Comm, fr, collectives.Avg, collectives.Tree); err != nil {
		return err
	}
	st.CommFraction = float64(fr[0]) / math.Max(float64(fr[1]), 1e-12)
	s.ls.epochStats(st)
	if s.ov != nil {
		h := float64(fr[2]) / math.Max(float64(fr[0]), 1e-12)
		st.CommHidden = &h
	}
	return nil
}

// Evaluate measures the test accuracy over every rank's test shard.
func (s *allreduceStrategy) Evaluate() (engine.EvalResult, error) {
	if _, err := s.j.SyncState(s.m, true); err != nil {
		return engine.EvalResult{}, err
	}
	return engine.EvaluateShard(s.j.Comm, s.m, s.test)
}

// modelState: the ranks' averaged batch-norm statistics (collective).
func (s *allreduceStrategy) modelState() ([]float32, error) { return s.j.SyncState(s.m, true) }

// saveState: the weights and optimizer state, on rank 0, and with error
// feedback every rank's residue (collective: the others send theirs).
func (s *allreduceStrategy) saveState() (*ckpt.File, error) {
	res, err := s.wire.gatherResidues(s.j.Comm)
	if err != nil || s.j.Comm.Rank() != 0 {
		return nil, err
	}
	c := &ckpt.File{Meta: ckpt.Meta{Arch: s.m.Arch}, State: model.State{Params: make([]float32, s.m.NumParams())}}
	if err := s.j.Backend.Download(c.Params, s.m.Params); err != nil {
		return nil, err
	}
	if s.opt.StateLen() > 0 {
		if c.Opt, err = s.opt.SaveState(); err != nil {
			return nil, err
		}
	}
	c.Residues = res
	return c, nil
}

// reduceBucket sums bucket i (buf) over the ranks, in a span: the one
// AllReduce call of a bucket, made by the communication goroutine or, in
// sequence, by Exchange. With --compress the bucket travels in 16 bits,
// the stats slots (in bucket 0) in 32, after error feedback.
func (s *allreduceStrategy) reduceBucket(i int, buf []float32) error {
	tr := s.j.Trace
	if s.ov != nil {
		tr = s.ovTr
	}
	ar := s.ar
	if g := s.wire; g != nil && g.wire != collectives.WireF32 {
		ar.ExactTail = 0
		if i == 0 {
			ar.ExactTail = model.GradStats
		}
		g.feed(buf[:len(buf)-ar.ExactTail], s.plan[i].lo, ar.Scale)
	}
	sp := tr.Begin("allreduce").Cat(trace.Collective).Bytes(4*ar.Wire.Words(len(buf), ar.ExactTail)).Arg("bucket", i)
	err := ar.Allreduce(buf, collectives.Sum)
	sp.Err(err).End()
	return err
}
