package engine

import (
	"fmt"
	"math"
	"time"

	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/trace"
)

// shuffleSeed is this shard's shuffling seed: --seed mixed with the shard
// index, so that shards are shuffled independently. (With one permutation
// for all shards, samples r and r+N would meet in the same global batch
// every epoch; mixing the index gave 0.875 instead of 0.869 test accuracy on
// the demo run, see docs/results.md.)
func (j *Job) shuffleSeed() uint64 { return shardSeed(j.Cfg.Seed, j.ShardIdx) }

// SyncBNNote is what the line before training adds under --sync-bn:
// ", batch norm over every training rank's batch (SyncBN)", else "".
func (j *Job) SyncBNNote() string {
	if !j.Cfg.SyncBN {
		return ""
	}
	return ", batch norm over every training rank's batch (SyncBN)"
}

// BatchLabel is a rank's batch for the line before training: "24", or
// under --accumulate "24 (3 micro-batches of 8 accumulated)".
func (j *Job) BatchLabel() string {
	b := j.Cfg.Batch
	if j.Cfg.Accumulate <= 1 || j.Micro <= 0 || j.Micro >= b {
		return fmt.Sprint(b)
	}
	return fmt.Sprintf("%d (%d micro-batches of %d accumulated)", b, (b+j.Micro-1)/j.Micro, j.Micro)
}

// GlobalBatch is the number of samples all ranks together use at a step
// of the epoch the loop is in: the schedule's, or in a re-dealt epoch
// (reshard.go) the parts'.
func (j *Job) GlobalBatch(step int) int {
	if j.partLens == nil {
		return j.Sched.GlobalBatch(step)
	}
	total := 0
	for _, n := range j.partLens {
		total += max(0, min(j.Sched.Batch, n-step*j.Sched.Batch))
	}
	return total
}

// evalDue says whether the epoch just trained is measured on the test set:
// every --eval-every epochs, and after the last one.
func (j *Job) evalDue(epoch int, last bool) bool {
	c := j.Cfg
	return c.EvalEvery > 0 && (epoch%c.EvalEvery == 0 || epoch == c.Epochs || last)
}

// ownPace is a paced rank's walk through its own shard: epochs of its
// own, each in its own order, one after another.
type ownPace struct {
	j           *Job
	epoch, step int // the local epoch and the step within it
	steps       int // a local epoch's steps
	order       []int
}

func newOwnPace(j *Job, start Position) *ownPace {
	w := &ownPace{j: j, epoch: max(1, start.Epoch), steps: (j.Sched.shard + j.Cfg.Batch - 1) / j.Cfg.Batch}
	w.order = data.EpochOrder(j.Sched.shard, j.shuffleSeed(), w.epoch, j.Cfg.Shuffle)
	return w
}

// next returns the next step's samples, starting a new local epoch when
// the last one is used up.
func (w *ownPace) next() []int {
	if w.step == w.steps || w.steps == 0 {
		w.epoch, w.step = w.epoch+1, 0
		w.order = data.EpochOrder(w.j.Sched.shard, w.j.shuffleSeed(), w.epoch, w.j.Cfg.Shuffle)
	}
	b := w.j.Cfg.Batch
	lo, hi := min(w.step*b, len(w.order)), min((w.step+1)*b, len(w.order))
	w.step++
	return w.order[lo:hi]
}

// Loop trains from position start to the end (the last epoch, or
// --max-steps counted from the job's first step), recording the epochs in
// res. It returns the position it stopped at and the samples trained on,
// in the strategy's Scope. A pacer's epochs end where it says instead.
//
// Its pieces: epochOrder (where an epoch's steps come from), runEpoch
// (its steps: runStep, one step, and the boundary after it, stop vote and
// checkpoint: checkpoint.go), endEpoch (statistics and evaluation),
// pacedMeeting (a pacer's epoch end) and endTraining (the end of
// training).
func (j *Job) Loop(s Strategy, start Position, res *Result) (Position, float64, error) {
	cfg := j.Cfg
	s = hooked{s, s.Hooks()}
	p := s.Hooks().Pace
	paced := p != nil
	metrics, bar, err := j.outputs(start, paced)
	if err != nil {
		return start, 0, err
	}
	defer metrics.close()
	j.printf("%s\n", s.Describe())
	var own *pacedSteps
	if paced {
		own = &pacedSteps{p: p, ownPace: newOwnPace(j, start)} // from a synchronisation point's checkpoint: its epoch's order
	}
	pos := start
	res.Steps = start.Steps
	limit := func() bool { return !paced && cfg.MaxSteps >= 0 && res.Steps >= cfg.MaxSteps }
	done := limit()
	total := 0.0
	for pos.Epoch <= cfg.Epochs && !done {
		a := epochAcc{epoch: pos.Epoch, t0: time.Now(), steps: j.Sched.StepsPerEpoch()}
		order, next, err := j.epochOrder(s, &a, pos, paced)
		if err != nil {
			return pos, 0, err
		}
		if next != nil { // nothing of a re-dealt epoch was left
			pos = *next
			continue
		}
		stepsDone, err := j.runEpoch(s, &a, &pos, res, order, own, bar, limit)
		if err != nil {
			return pos, 0, err
		}
		// Reaching --max-steps on the epoch's last step ends training here,
		// so that this epoch's evaluation sees the final weights.
		done = stepsDone || limit()
		if pos.Step >= a.steps {
			pos = Position{Epoch: a.epoch + 1, Steps: pos.Steps}
		}
		if len(pos.Reshard) == 0 {
			j.endReshard(s)
		}
		bar.clear()
		if a.ran == 0 && !paced {
			break
		}
		total += a.seen
		st, err := j.endEpoch(s, &a, res, done)
		if err != nil {
			return pos, 0, err
		}
		if err := j.pacedMeeting(s, p, a.epoch, res, done); err != nil {
			return pos, 0, err
		}
		j.report(metrics, st)
	}
	if paced {
		n, err := p.TotalSteps(res.Steps)
		res.Steps = n
		return pos, total, err
	}
	return pos, total, j.endTraining(s, start, pos, res)
}

// outputs opens the run's metrics file and progress bar (the reporting
// rank's; the bar on a terminal, for a scheduled run).
func (j *Job) outputs(start Position, paced bool) (*metricsFile, *progress, error) {
	metrics, err := openMetrics(pick(j.Reports(), j.Cfg.Metrics), start.Steps > 0)
	if err != nil {
		return nil, nil, err
	}
	var bar *progress
	if j.Progress && j.Reports() && j.Out != nil && !paced {
		bar = &progress{w: j.Out}
	}
	return metrics, bar, nil
}

// report prints the epoch's line and writes its metrics, on the
// reporting rank.
func (j *Job) report(metrics *metricsFile, st EpochStats) {
	if !j.Reports() {
		return
	}
	j.printf("%s\n", st)
	if err := metrics.write(st.withText()); err != nil {
		j.warnf("%v; training goes on", err)
	}
}

// pacedSteps is where a pacer's steps come from: its own walk through its
// shard (ownPace), with the pacer asked before each step whether a
// synchronisation point ends the epoch first.
type pacedSteps struct {
	*ownPace
	p          Pacer
	justSynced bool // a point ended the last epoch
}

// next returns the next step's samples, or the point that comes first.
// After a point, a step comes before the next question (as in the loop
// AD-PSGD had: asked at once, rank 0 could call point after point on the
// others' progress and never step itself, TestDecentralizedLearns),
// unless the rank has spent its steps.
func (ps *pacedSteps) next() ([]int, *syncPoint, error) {
	if !ps.justSynced || ps.p.Spent() {
		pt, err := ps.p.SyncPoint()
		if err != nil || pt != nil {
			ps.justSynced = pt != nil
			return nil, pt, err
		}
	}
	ps.justSynced = false
	return ps.ownPace.next(), nil, nil
}

// walk is the pacer's own walk (nil for a scheduled run).
func (ps *pacedSteps) walk() *ownPace {
	if ps == nil {
		return nil
	}
	return ps.ownPace
}

// runEpoch runs the epoch's steps from pos — a scheduled run's until
// the epoch ends, --max-steps is reached (limit) or a boundary stops it; a
// pacer's until its synchronisation point — and reports whether training
// is done.
func (j *Job) runEpoch(s Strategy, a *epochAcc, pos *Position, res *Result, order []int, own *pacedSteps, bar *progress, limit func() bool) (bool, error) {
	paced, b := own != nil, j.Cfg.Batch
	for ; paced || pos.Step < a.steps; pos.Step++ {
		var idx []int
		if paced {
			var pt *syncPoint
			var err error
			if idx, pt, err = own.next(); err != nil {
				return false, err
			}
			if pt != nil {
				a.epoch = pt.Epoch
				*pos = Position{Epoch: pt.Epoch, Step: a.steps, Steps: res.Steps}
				return pt.Final, nil
			}
		} else {
			if limit() {
				return true, nil
			}
			idx = order[min(pos.Step*b, len(order)):min((pos.Step+1)*b, len(order))]
		}
		next, samples, err := j.runStep(s, a, pos, res, idx, own.walk())
		if err != nil {
			return false, err
		}
		if paced {
			own.p.Stepped(samples)
			continue
		}
		bar.update(a.epoch, pos.Step+1, a.steps, a.lossSum/math.Max(a.seen, 1))
		// The step boundary: stop vote and checkpoint (checkpoint.go).
		stop, err := j.boundary(s, next)
		if err != nil {
			return false, err
		}
		if stop {
			j.interrupted, j.stoppedAt = true, next
			pos.Step++
			return true, nil
		}
	}
	return false, nil
}

// epochAcc is one epoch's running figures.
type epochAcc struct {
	epoch, steps int // the epoch, and its steps (a re-dealt one's fewer)
	ran          int // steps run
	t0           time.Time
	sent0        int64 // the strategy's bytes sent before it (Hooks.SentBytes)

	lossSum, correct, seen, commSec, stepSec float64
}

// epochOrder is where the epoch's steps come from: its samples' order on
// this rank (none for a pacer, which walks its own: ownPace), and for an
// epoch begun by another number of ranks the part of it left (a.steps).
// Where nothing of that part is left, next is the position to go on from
// instead.
func (j *Job) epochOrder(s Strategy, a *epochAcc, pos Position, paced bool) (order []int, next *Position, err error) {
	switch {
	case paced:
	case len(pos.Reshard) > 0: // begun by another number of ranks
		if order, a.steps, err = j.reshardEpoch(s, a.epoch, pos.Reshard); err != nil {
			return nil, nil, err
		}
		if a.steps == 0 {
			j.endReshard(s)
			return nil, &Position{Epoch: a.epoch + 1, Steps: pos.Steps}, nil
		}
	default:
		order = data.EpochOrder(j.Sched.shard, j.shuffleSeed(), a.epoch, j.Cfg.Shuffle)
	}
	j.EpochLen = a.steps
	if sent := s.Hooks().SentBytes; sent != nil {
		a.sent0 = sent()
	}
	return order, nil, nil
}

// runStep runs one step on the samples idx at pos (a pacer's: own's next
// step) and adds its figures to a and res; next is the step boundary
// after it, and samples the samples it covered.
func (j *Job) runStep(s Strategy, a *epochAcc, pos *Position, res *Result, idx []int, own *ownPace) (next Position, samples float64, err error) {
	paced := own != nil
	spEpoch, spStep, step := a.epoch, pos.Step, pos.Step
	if paced {
		spEpoch, spStep = own.epoch, own.step-1
		step = res.Steps // the strategy's own count
	}
	j.augEpoch = spEpoch
	ts := time.Now()
	next = Position{Epoch: a.epoch, Step: step + 1, Steps: res.Steps + 1, Reshard: pos.Reshard}
	if next.Step >= a.steps {
		next = Position{Epoch: a.epoch + 1, Steps: res.Steps + 1}
	}
	if j.LW != nil && !paced {
		j.LW.stepBegins(next)
	}
	lr := j.Cfg.Opt.LR
	if j.lrs != nil {
		e := EpochAt(a.epoch, pos.Step, a.steps)
		if paced {
			e = EpochAt(own.epoch, own.step-1, own.steps)
		}
		lr = j.lrs.At(e)
		j.epochLR = append(j.epochLR, lr)
	}
	j.setStep(s, lr, res.Steps+1)
	j.markStep(res.Steps + 1)
	sp := j.Trace.Begin("step").Arg("epoch", spEpoch).Arg("step", spStep)
	st, err := j.step(s, idx, step)
	sp.Err(err).End()
	if err != nil {
		who, counter := j.who(), "global step"
		if paced {
			who, counter = fmt.Sprintf("rank %d, ", j.Comm.Rank()), "this rank's step"
		}
		return next, 0, fmt.Errorf("%sepoch %d step %d (%s %d): %w", who, spEpoch, spStep, counter, res.Steps+1, err)
	}
	a.lossSum += st.LossSum
	a.correct += st.Correct
	a.seen += st.Samples
	a.commSec += st.CommSec
	a.stepSec += time.Since(ts).Seconds()
	res.Steps++
	pos.Steps = res.Steps
	if f := j.FirstStep; f != nil && !j.stepped {
		j.stepped = true
		f(res.Steps)
	}
	a.ran++
	return next, st.Samples, nil
}

// endEpoch makes the epoch's statistics (the strategy adds its own) and
// evaluates where due, recording them in res.
func (j *Job) endEpoch(s Strategy, a *epochAcc, res *Result, done bool) (EpochStats, error) {
	wall := time.Since(a.t0).Seconds()
	lrs := j.epochLR
	j.epochLR = nil
	st := EpochStats{Epoch: a.epoch, Steps: a.ran, LR: lrs, LossScope: s.Scope(), Loss: a.lossSum / math.Max(a.seen, 1),
		TrainAcc: a.correct / math.Max(a.seen, 1), SamplesPerSec: a.seen / wall, TrainSec: wall}
	if j.Cfg.Data.Name == "text" {
		st.SeqLen = j.Cfg.Data.EffectiveSeqLen()
	}
	if sent := s.Hooks().SentBytes; sent != nil && a.ran > 0 {
		b := float64(sent()-a.sent0) / float64(a.ran)
		st.BytesPerStep = &b
	}
	if err := s.EndEpoch(&st, a.commSec, a.stepSec, wall); err != nil {
		return st, err
	}
	if j.evalDue(a.epoch, done) && !j.interrupted {
		sp := j.Trace.Begin("evaluate").Arg("epoch", a.epoch)
		ev, err := s.Evaluate()
		sp.Err(err).End()
		if err != nil {
			return st, err
		}
		if ev.Interrupted { // a stop signal came while it ran: not evaluated
			j.warnf("epoch %d: the evaluation was interrupted by a stop signal: its figures are left out", a.epoch)
			res.TestAcc = math.NaN()
			st.WallSec = time.Since(a.t0).Seconds()
			res.Epochs = append(res.Epochs, st)
			return st, nil
		}
		st.TestAcc = &ev.Accuracy
		if !math.IsNaN(ev.Loss) {
			st.TestLoss = &ev.Loss
		}
		res.TestAcc = ev.Accuracy
	}
	st.WallSec = time.Since(a.t0).Seconds()
	res.Epochs = append(res.Epochs, st)
	return st, nil
}

// pacedMeeting is a pacer's epoch end, where the ranks meet: a checkpoint
// when one is due (every --checkpoint-every Ne epochs, and at the end),
// then the pacer goes on. Without a pacer (p nil) there is none.
func (j *Job) pacedMeeting(s Strategy, p Pacer, epoch int, res *Result, done bool) error {
	if p == nil {
		return nil
	}
	if s.Hooks().SaveState != nil && j.Checkpoint.Enabled() && (done || j.Checkpoint.EveryEpochs > 0 && epoch%j.Checkpoint.EveryEpochs == 0) {
		n, err := p.TotalSteps(res.Steps) // every rank's steps together (a collective)
		if err == nil {
			err = j.writeCheckpoint(s, Position{Epoch: epoch + 1, Steps: n})
		}
		if err != nil {
			return err
		}
	}
	p.ResumeAfter(&syncPoint{Epoch: epoch, Final: done})
	return nil
}

// endTraining ends a scheduled run at pos: stopped mid-way, the last
// evaluation was of earlier weights, so the summary's accuracy is
// measured again, on the weights it stopped with (every rank stopped at
// the same boundary, so all take part); at the end of training (the last
// epoch, or --max-steps) a final checkpoint, unless the last boundary
// wrote one.
func (j *Job) endTraining(s Strategy, start, pos Position, res *Result) error {
	if j.interrupted {
		res.TestAcc = math.NaN()
	}
	if j.Checkpoint.Enabled() && !j.interrupted && pos.Steps > start.Steps && j.lastCheckpointSteps != pos.Steps {
		return j.writeCheckpoint(s, pos)
	}
	return nil
}

// LoadHook, when set (tests), is told what every step's batch loads on a
// rank: the epoch and step, the set and its rows, and the global batch the
// gradient is scaled by (−1 where a rank scales by its own batch).
var LoadHook func(rank, epoch, step int, set *data.Dense, idx []int, globalBatch int)

// Loaded tells LoadHook of a batch.
func (j *Job) Loaded(step int, set *data.Dense, idx []int, globalBatch int) {
	if LoadHook != nil {
		LoadHook(j.Comm.Rank(), j.augEpoch, step, set, idx, globalBatch)
	}
}

// step runs one step of s: prepare, compute, the straggler's delay, exchange.
func (j *Job) step(s Strategy, idx []int, step int) (StepStats, error) {
	if err := s.Prepare(idx, step); err != nil {
		return StepStats{}, err
	}
	t0 := time.Now()
	if err := s.Compute(); err != nil {
		return StepStats{}, err
	}
	if st := j.Cfg.Straggle; st.Rank == j.Comm.Rank() && st.Factor > 1 {
		sp := j.Trace.Begin("straggle").Cat(trace.Wait)
		time.Sleep(time.Duration(float64(time.Since(t0)) * (st.Factor - 1)))
		sp.End()
	}
	return s.Exchange(step)
}

// who prefixes a step's error where ranks serve (ps), and a worker fails
// alone.
func (j *Job) who() string {
	if j.Reporter > 0 {
		return fmt.Sprintf("worker rank %d, ", j.Comm.Rank())
	}
	return ""
}

func pick(ok bool, s string) string {
	if ok {
		return s
	}
	return ""
}
