package trainer

import (
	"fmt"
	"math"
	"time"

	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/trace"
)

// Strategy is how the ranks that train combine their work at each step:
// one per --sync (AllReduce; parameter-server worker, dense or sparse; a
// decentralised one fits the same shape). The loop owns the epoch order,
// the step schedule, --max-steps, the straggler delay, the evaluation
// schedule, the progress bar and the metrics; a Strategy owns the weights,
// the gradient and the communication.
//
// At each step the loop calls Prepare, Compute, then (when this rank is the
// straggler, --straggle) sleeps in proportion to Compute's time, then
// Exchange.
type Strategy interface {
	// Describe is the line printed before training.
	Describe() string
	// Scope says what Exchange's loss, correct count and samples cover.
	Scope() Scope
	// Prepare fetches what step `step` needs for this rank's samples idx
	// (possibly none): the weights it pulls, the batch. Its waiting is
	// reported in Exchange's CommSec.
	Prepare(idx []int, step int) error
	// Compute computes the gradient of the samples Prepare fetched.
	Compute() error
	// Exchange combines the gradient with the other ranks (AllReduce, push)
	// and updates the weights it holds.
	Exchange(step int) (StepStats, error)
	// EndEpoch fills in the strategy's part of an epoch's figures
	// (CommFraction, parameter-server figures) from the seconds this rank
	// spent communicating and stepping. Every training rank calls it.
	EndEpoch(st *EpochStats, commSec, stepSec, wallSec float64) error
	// Evaluate measures the test accuracy with the current weights, after
	// an epoch the evaluation schedule picks. Every training rank calls
	// it; a strategy whose evaluation is not collective returns NaN on the
	// ranks that do not report.
	Evaluate() (float64, error)
	// setStep gives the step about to run its rate (the schedule's) and
	// its count from 1 (Adam's bias correction). Required: a strategy
	// that let it fall away would train at the first step's rate, and
	// Adam at step 1, without a word.
	setStep(lr float32, t int)
}

// byteCounter is a Strategy that counts the bytes it sends (the
// BytesPerStep figure).
type byteCounter interface {
	sentBytes() int64
}

// Scope is what a strategy's reported loss and accuracy mean (the
// "loss_scope" metrics field).
type Scope string

const (
	// ScopeGlobal: over the global batch of every rank (the AllReduce sums
	// the statistics with the gradient).
	ScopeGlobal Scope = "global"
	// ScopeWorker: over the reporting worker's own samples only.
	ScopeWorker Scope = "worker"
)

// StepStats is one step's figures as a strategy reports them, in its Scope.
type StepStats struct {
	LossSum, Correct float64 // summed loss and correct count
	Samples          float64 // samples they cover
	CommSec          float64 // seconds spent in AllReduce, or waiting in Pull and Push
}

// schedule is the step plan every training rank shares.
type schedule struct {
	n     int // global training set size
	ranks int // ranks that train: all under allreduce, the workers under ps
	batch int // per rank
	shard int // this rank's training samples (0 on a server)
}

// stepsPerEpoch: every rank runs the same number of steps, enough for the
// largest shard; a rank whose shard is used up contributes an empty batch.
func (s schedule) stepsPerEpoch() int {
	gb := s.batch * s.ranks
	return (s.n + gb - 1) / gb
}

// globalBatch is the number of samples all ranks together use at a step.
func (s schedule) globalBatch(step int) int {
	total := 0
	for q := 0; q < s.ranks; q++ {
		total += max(0, min(s.batch, data.ShardLen(s.n, q, s.ranks)-step*s.batch))
	}
	return total
}

// shuffleSeed is this shard's shuffling seed: --seed mixed with the shard
// index, so that shards are shuffled independently. (With one permutation
// for all shards, samples r and r+N would meet in the same global batch
// every epoch; mixing the index gave 0.875 instead of 0.869 test accuracy on
// the demo run, see docs/results.md.)
func (j *job) shuffleSeed() uint64 { return shardSeed(j.cfg.Seed, j.shardIdx) }

// globalBatch is the number of samples all ranks together use at a step
// of the epoch the loop is in: the schedule's, or in a re-dealt epoch
// (reshard.go) the parts'.
func (j *job) globalBatch(step int) int {
	if j.partLens == nil {
		return j.sched.globalBatch(step)
	}
	total := 0
	for _, n := range j.partLens {
		total += max(0, min(j.sched.batch, n-step*j.sched.batch))
	}
	return total
}

// evalDue says whether the epoch just trained is measured on the test set:
// every --eval-every epochs, and after the last one.
func (j *job) evalDue(epoch int, last bool) bool {
	c := j.cfg
	return c.EvalEvery > 0 && (epoch%c.EvalEvery == 0 || epoch == c.Epochs || last)
}

// pacer is a Strategy whose epochs end where it says rather than after
// the schedule's steps: its ranks run at their own pace (adpsgd, where
// rank 0 calls a synchronisation point once the ranks together have
// trained an epoch's samples). The loop then walks this rank's shard in
// epochs of its own (ownPace) and asks before every step whether a point
// ends the epoch; --max-steps and the epoch count are the strategy's to
// apply (across the ranks), and there is no stop vote or checkpoint.
type pacer interface {
	// syncPoint is asked before every step: non-nil ends the epoch here.
	syncPoint() (*syncPoint, error)
	// stepped counts a step this rank finished, of samples samples.
	stepped(samples float64)
	// resumeAfter lets the ranks go on once the point's epoch is recorded.
	resumeAfter(pt *syncPoint)
	// totalSteps is every rank's steps together (a collective at the
	// end), mine this rank's.
	totalSteps(mine int) (int, error)
}

// syncPoint is the end of a paced epoch.
type syncPoint struct {
	epoch int
	final bool // training ends with it
}

// ownPace is a paced rank's walk through its own shard: epochs of its
// own, each in its own order, one after another.
type ownPace struct {
	j           *job
	epoch, step int // the local epoch and the step within it
	steps       int // a local epoch's steps
	order       []int
}

func newOwnPace(j *job, start Position) *ownPace {
	w := &ownPace{j: j, epoch: max(1, start.Epoch), steps: (j.sched.shard + j.cfg.Batch - 1) / j.cfg.Batch}
	w.order = data.EpochOrder(j.sched.shard, j.shuffleSeed(), w.epoch, j.cfg.Shuffle)
	return w
}

// next returns the next step's samples, starting a new local epoch when
// the last one is used up.
func (w *ownPace) next() []int {
	if w.step == w.steps || w.steps == 0 {
		w.epoch, w.step = w.epoch+1, 0
		w.order = data.EpochOrder(w.j.sched.shard, w.j.shuffleSeed(), w.epoch, w.j.cfg.Shuffle)
	}
	b := w.j.cfg.Batch
	lo, hi := min(w.step*b, len(w.order)), min((w.step+1)*b, len(w.order))
	w.step++
	return w.order[lo:hi]
}

// loop trains from position start to the end (the last epoch, or
// --max-steps counted from the job's first step), recording the epochs in
// res. It returns the position it stopped at and the samples trained on,
// in the strategy's Scope. A pacer's epochs end where it says instead.
func (j *job) loop(s Strategy, start Position, res *Result) (Position, float64, error) {
	cfg := j.cfg
	metrics, err := openMetrics(pick(j.reports(), cfg.Metrics), start.Steps > 0)
	if err != nil {
		return start, 0, err
	}
	defer metrics.close()
	p, paced := s.(pacer)
	var bar *progress
	if j.Progress && j.reports() && j.Out != nil && !paced {
		bar = &progress{w: j.Out}
	}
	j.printf("%s\n", s.Describe())
	scope := s.Scope()
	var own *ownPace
	if paced {
		own = newOwnPace(j, start) // from a synchronisation point's checkpoint: its epoch's order
	}
	pos := start
	res.Steps = start.Steps
	limit := func() bool { return !paced && cfg.MaxSteps >= 0 && res.Steps >= cfg.MaxSteps }
	justSynced := false // a pacer's point ended the last epoch
	done := limit()
	total := 0.0
	for pos.Epoch <= cfg.Epochs && !done {
		epoch := pos.Epoch
		t0 := time.Now()
		steps := j.sched.stepsPerEpoch()
		var order []int
		switch {
		case paced:
		case len(pos.Reshard) > 0: // begun by another number of ranks
			var err error
			if order, steps, err = j.reshardEpoch(s, epoch, pos.Reshard); err != nil {
				return pos, 0, err
			}
			if steps == 0 { // nothing of it was left
				j.endReshard(s)
				pos = Position{Epoch: epoch + 1, Steps: pos.Steps}
				continue
			}
		default:
			order = data.EpochOrder(j.sched.shard, j.shuffleSeed(), epoch, cfg.Shuffle)
		}
		j.epochLen = steps
		bc, counts := s.(byteCounter)
		var sent0 int64
		if counts {
			sent0 = bc.sentBytes()
		}
		var lossSum, correct, seen, commSec, stepSec float64
		ran := 0
		for ; paced || pos.Step < steps; pos.Step++ {
			var idx []int
			spEpoch, spStep := epoch, pos.Step
			if paced {
				// After a point, a step comes before the next question (as
				// in the loop AD-PSGD had: asked at once, rank 0 could call
				// point after point on the others' progress and never step
				// itself, TestDecentralizedLearns).
				if !justSynced {
					pt, err := p.syncPoint()
					if err != nil {
						return pos, 0, err
					}
					if pt != nil {
						epoch, done, justSynced = pt.epoch, pt.final, true
						pos = Position{Epoch: pt.epoch, Step: steps, Steps: res.Steps}
						break
					}
				}
				justSynced = false
				idx = own.next()
				spEpoch, spStep = own.epoch, own.step-1
			} else {
				if limit() {
					done = true
					break
				}
				lo, hi := min(pos.Step*cfg.Batch, len(order)), min((pos.Step+1)*cfg.Batch, len(order))
				idx = order[lo:hi]
			}
			step := pos.Step
			j.augEpoch = spEpoch
			if paced {
				step = res.Steps // the strategy's own count
			}
			ts := time.Now()
			// The step boundary after this step.
			next := Position{Epoch: epoch, Step: step + 1, Steps: res.Steps + 1, Reshard: pos.Reshard}
			if next.Step >= steps {
				next = Position{Epoch: epoch + 1, Steps: res.Steps + 1}
			}
			if j.lw != nil && !paced {
				j.lw.stepBegins(next)
			}
			lr := cfg.Opt.LR
			if j.lrs != nil {
				e := epochAt(epoch, pos.Step, steps)
				if paced {
					e = epochAt(own.epoch, own.step-1, own.steps)
				}
				lr = j.lrs.at(e)
				j.epochLR = append(j.epochLR, lr)
			}
			j.setStep(s, lr, res.Steps+1)
			j.markStep(res.Steps + 1)
			sp := j.tr.Begin("step").Arg("epoch", spEpoch).Arg("step", spStep)
			st, err := j.step(s, idx, step)
			sp.Err(err).End()
			if err != nil {
				who, counter := j.who(), "global step"
				if paced {
					who, counter = fmt.Sprintf("rank %d, ", j.Comm.Rank()), "this rank's step"
				}
				return pos, 0, fmt.Errorf("%sepoch %d step %d (%s %d): %w", who, spEpoch, spStep, counter, res.Steps+1, err)
			}
			lossSum += st.LossSum
			correct += st.Correct
			seen += st.Samples
			commSec += st.CommSec
			stepSec += time.Since(ts).Seconds()
			res.Steps++
			pos.Steps = res.Steps
			if f := j.FirstStep; f != nil && !j.stepped {
				j.stepped = true
				f(res.Steps)
			}
			ran++
			if paced {
				p.stepped(st.Samples)
				continue
			}
			bar.update(epoch, step+1, steps, lossSum/math.Max(seen, 1))
			// The step boundary: stop vote and checkpoint (checkpoint.go).
			stop, err := j.boundary(s, next)
			if err != nil {
				return pos, 0, err
			}
			if stop {
				j.interrupted, j.stoppedAt, done = true, next, true
				pos.Step++
				break
			}
		}
		// Reaching --max-steps on the epoch's last step ends training here,
		// so that this epoch's evaluation sees the final weights.
		done = done || limit()
		if pos.Step >= steps {
			pos = Position{Epoch: epoch + 1, Steps: pos.Steps}
		}
		if len(pos.Reshard) == 0 {
			j.endReshard(s)
		}
		bar.clear()
		if ran == 0 && !paced {
			break
		}
		total += seen
		wall := time.Since(t0).Seconds()
		lrs := j.epochLR
		j.epochLR = nil
		st := EpochStats{Epoch: epoch, Steps: ran, LR: lrs, LossScope: scope, Loss: lossSum / math.Max(seen, 1),
			TrainAcc: correct / math.Max(seen, 1), SamplesPerSec: seen / wall, TrainSec: wall}
		if counts && ran > 0 {
			b := float64(bc.sentBytes()-sent0) / float64(ran)
			st.BytesPerStep = &b
		}
		if err := s.EndEpoch(&st, commSec, stepSec, wall); err != nil {
			return pos, 0, err
		}
		if j.evalDue(epoch, done) && !j.interrupted {
			sp := j.tr.Begin("evaluate").Arg("epoch", epoch)
			acc, err := s.Evaluate()
			sp.Err(err).End()
			if err != nil {
				return pos, 0, err
			}
			st.TestAcc = &acc
			res.TestAcc = acc
		}
		st.WallSec = time.Since(t0).Seconds()
		res.Epochs = append(res.Epochs, st)
		if paced {
			// The ranks meet here: a checkpoint when one is due (every
			// --checkpoint-every Ne epochs, and at the end).
			if _, ok := s.(checkpointer); ok && j.Checkpoint.enabled() && (done || j.Checkpoint.EveryEpochs > 0 && epoch%j.Checkpoint.EveryEpochs == 0) {
				n, err := p.totalSteps(res.Steps) // every rank's steps together (a collective)
				if err == nil {
					err = j.writeCheckpoint(s, Position{Epoch: epoch + 1, Steps: n})
				}
				if err != nil {
					return pos, 0, err
				}
			}
			p.resumeAfter(&syncPoint{epoch: epoch, final: done})
		}
		if !j.reports() {
			continue
		}
		j.printf("%s\n", st)
		if err := metrics.write(st); err != nil {
			j.warnf("%v; training goes on", err)
		}
	}
	if paced {
		n, err := p.totalSteps(res.Steps)
		res.Steps = n
		return pos, total, err
	}
	// Stopped mid-way: the last evaluation was of earlier weights, so the
	// summary's accuracy is measured again, on the weights it stopped with
	// (every rank stopped at the same boundary, so all take part).
	if j.interrupted {
		res.TestAcc = math.NaN()
	}
	// The end of training (the last epoch, or --max-steps): a final
	// checkpoint, unless the last boundary wrote one.
	if j.Checkpoint.enabled() && !j.interrupted && pos.Steps > start.Steps && j.lastCheckpointSteps != pos.Steps {
		if err := j.writeCheckpoint(s, pos); err != nil {
			return pos, 0, err
		}
	}
	return pos, total, nil
}

// loadHook, when set (tests), is told what every step's batch loads on a
// rank: the epoch and step, the set and its rows, and the global batch the
// gradient is scaled by (−1 where a rank scales by its own batch).
var loadHook func(rank, epoch, step int, set *data.Dense, idx []int, globalBatch int)

// loaded tells loadHook of a batch.
func (j *job) loaded(step int, set *data.Dense, idx []int, globalBatch int) {
	if loadHook != nil {
		loadHook(j.Comm.Rank(), j.augEpoch, step, set, idx, globalBatch)
	}
}

// step runs one step of s: prepare, compute, the straggler's delay, exchange.
func (j *job) step(s Strategy, idx []int, step int) (StepStats, error) {
	if err := s.Prepare(idx, step); err != nil {
		return StepStats{}, err
	}
	t0 := time.Now()
	if err := s.Compute(); err != nil {
		return StepStats{}, err
	}
	if st := j.cfg.Straggle; st.Rank == j.Comm.Rank() && st.Factor > 1 {
		sp := j.tr.Begin("straggle").Cat(trace.Wait)
		time.Sleep(time.Duration(float64(time.Since(t0)) * (st.Factor - 1)))
		sp.End()
	}
	return s.Exchange(step)
}

// who prefixes a step's error where ranks serve (ps), and a worker fails
// alone.
func (j *job) who() string {
	if j.reporter > 0 {
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
