package engine

import (
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/gossip"
)

// What the loop (loop.go) steps through: the Strategy interface, its
// optional parts (Hooks), the pace of a strategy whose ranks run on their
// own (pacer), and the step plan every training rank shares (schedule).

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
	Evaluate() (EvalResult, error)
	// Hooks are the strategy's optional parts.
	Hooks() Hooks
	// SetStep gives the step about to run its rate (the schedule's) and
	// its count from 1 (Adam's bias correction). Required: a strategy
	// that let it fall away would train at the first step's rate, and
	// Adam at step 1, without a word.
	SetStep(lr float32, t int)
}

// Hooks are a strategy's optional parts, each nil where it has none: the
// loop, the checkpoints and resharding read them here (Strategy.Hooks), in
// one place, rather than finding methods by type assertions that a renamed
// or re-typed method would miss without a word.
type Hooks struct {
	// SaveState writes checkpoints: every training rank calls it at the
	// same step boundary; the reporting rank gets the state to write, the
	// others nil. nil: the strategy cannot write them.
	SaveState func() (*checkpoint, error)
	// ModelState is the model's state beside its weights (batch norms'
	// running statistics) for a checkpoint: every training rank calls it
	// at the same boundary as saveState (it may be a collective); the
	// reporting rank's goes into the checkpoint.
	ModelState func() ([]float32, error)
	// VoteStop combines the ranks' wishes to stop; nil: a one-float
	// AllReduce over every rank of the Comm (right where every rank
	// trains).
	VoteStop func(local bool) (bool, error)
	// Pace is set by a strategy whose ranks run at their own Pace
	// (AD-PSGD): the loop asks it where an epoch ends.
	Pace Pacer
	// SentBytes counts the bytes the strategy sent (BytesPerStep).
	SentBytes func() int64
	// SetTrain replaces the training rows for a re-dealt epoch
	// (SetTrain(nil): the rank's own shard again); nil: the strategy
	// cannot re-deal an epoch.
	SetTrain func(d *data.Dense)
}

// hooked is a Strategy whose hooks were taken once, when the loop began:
// hooks builds its functions from method values, which are allocated, and
// the loop asks for them at every step boundary.
type hooked struct {
	Strategy
	h Hooks
}

func (s hooked) Hooks() Hooks { return s.h }

// Pacer is a Strategy whose epochs end where it says rather than after
// the schedule's steps: its ranks run at their own pace (adpsgd, where
// rank 0 calls a synchronisation point once the ranks together have
// trained an epoch's samples). The loop then walks this rank's shard in
// epochs of its own (ownPace) and asks before every step whether a point
// ends the epoch; --max-steps and the epoch count are the strategy's to
// apply (across the ranks), and there is no stop vote or checkpoint.
type Pacer interface {
	// SyncPoint is asked before every step: non-nil ends the epoch here.
	SyncPoint() (*syncPoint, error)
	// Stepped counts a step this rank finished, of samples samples.
	Stepped(samples float64)
	// ResumeAfter lets the ranks go on once the point's epoch is recorded.
	ResumeAfter(pt *syncPoint)
	// TotalSteps is every rank's steps together (a collective at the
	// end), mine this rank's.
	TotalSteps(mine int) (int, error)
	// Spent says this rank has run all the steps it may (its share of
	// --max-steps): it takes none after a point either, and waits in
	// SyncPoint for the final one.
	Spent() bool
}

// syncPoint is the end of a paced epoch (gossip.Point: AD-PSGD's control
// protocol calls them).
type syncPoint = gossip.Point

// Schedule is the step plan every training rank shares.
type Schedule struct {
	N     int // global training set size
	Ranks int // ranks that train: all under allreduce, the workers under ps
	Batch int // per rank
	shard int // this rank's training samples (0 on a server)
}

// StepsPerEpoch: every rank runs the same number of steps, enough for the
// largest shard; a rank whose shard is used up contributes an empty batch.
func (s Schedule) StepsPerEpoch() int {
	gb := s.Batch * s.Ranks
	return (s.N + gb - 1) / gb
}

// GlobalBatch is the number of samples all ranks together use at a step.
func (s Schedule) GlobalBatch(step int) int {
	total := 0
	for q := 0; q < s.Ranks; q++ {
		total += max(0, min(s.Batch, data.ShardLen(s.N, q, s.Ranks)-step*s.Batch))
	}
	return total
}
