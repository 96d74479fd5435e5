package engine

import (
	"fmt"
	"io"
	"math"
	"sync/atomic"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/model"
	"github.com/dml-project/dml/trainer/trace"
)

// The job's types: what a run leaves (Result), what runs it (Trainer),
// and one job's state on this rank (Job) with its small helpers.

// Result is what a finished run leaves: the per-epoch figures and the
// final weights (the same on every rank).
type Result struct {
	Arch   model.Arch
	Params []float32
	// ModelState is a network's batch-norm running statistics at the end
	// (Arch.StateTensors; nil for models without), averaged over the ranks
	// that train (syncState).
	ModelState []float32
	Epochs     []EpochStats // on the reporting rank (rank 0; the first worker under ps)
	Steps      int          // steps run, counting those before a resumed State
	WallSec    float64
	TestAcc    float64 // at the end of training (NaN if never evaluated)
	// SamplesPerSec is the whole job's training throughput.
	SamplesPerSec float64
	// PS sums up the workers' parameter-server figures (with --sync ps).
	PS *PSStats
	// State is where training stopped, to resume from (sync allreduce;
	// nil under ps, whose weights and optimizer state live on the servers).
	State *TrainState
}

// Trainer holds what a run needs besides its Config.
type Trainer struct {
	Comm    collectives.Comm
	Backend kernels.Backend
	// Out receives the reporting rank's epoch lines and summary (nil: quiet).
	Out io.Writer
	// Warnings receives what goes wrong without ending the run (a metrics
	// file on a full disk), one line each, from the rank it happens on
	// (nil: not said).
	Warnings io.Writer
	// Progress draws a bar on Out while an epoch runs (reporting rank, terminals).
	Progress bool
	// Tracer, if not nil, receives spans of each step: step, batch,
	// forward, backward, download/upload, allreduce, pull, push, straggle,
	// update, evaluate (package trace). Nil costs nothing. For spans of
	// every op and message, wrap Comm and Backend with trace.Comm and
	// trace.Backend too. Goroutines beside the step loop (the overlapped
	// AllReduce, gossip, a passive rank's server, a ps server) record on
	// their own trace.Lane.
	Tracer trace.Tracer
	// CUDAGraph lets each training step's forward and backward pass run
	// as one recorded graph where the backend records them
	// (kernels.GraphOf: cuda, untraced) and the step hands nothing to the
	// host mid-way (one rank, or a strategy without per-layer downloads);
	// see model.Model.UseGraph. The weights are the same bits either way.
	CUDAGraph bool
	// Start, if not nil, resumes training from a saved state (sync
	// allreduce only): its weights and optimizer state replace the initial
	// ones and the loop starts at its (epoch, step).
	Start *TrainState
	// MemoryLimit, if positive, is the memory in bytes this rank may use
	// for its data and model: synthetic data and a dense model that need
	// more are refused before they are allocated (a usage error naming
	// the sizes), not left to the out-of-memory killer. MemorySource says
	// where the figure came from, for that message.
	MemoryLimit  int64
	MemorySource string
	// Checkpoint, if not nil, writes checkpoints and resumes from them
	// (checkpoint.go). Every rank must be given the same.
	Checkpoint *Checkpointing
	// Stop, if not nil, is asked at every step boundary whether this rank
	// wants training to stop (a signal came): the ranks agree on the step,
	// write a final checkpoint (with Checkpoint.Dir), and Run returns the
	// result so far with an error wrapping ErrInterrupted. Every rank must
	// have one, or none.
	Stop func() bool
	// Interrupt, if not nil, is asked between the test set's batches
	// whether to end an evaluation early (a stop signal came: the CLI
	// gives it Stop's answer; model.Model.Interrupt).
	Interrupt func() bool
	// FirstStep, if not nil, is called once, after the first step this
	// rank runs, with the steps run since the job's beginning (a
	// supervisor times its recovery by it: dml launch).
	FirstStep func(steps int)

	lastWord   atomic.Pointer[lastWord]        // LastWord's copy (lastword.go)
	serverWord atomic.Pointer[EmergencyWriter] // a ps server's (trainer/paramserver/lastword_ps.go)
}

// Job is what every rank knows about a run once it is set up: the
// configuration, who it is, which shard it trains on and the schedule.
// Strategies hold the rest (model, worker, buffers); what they read and
// call of the job is its exported fields and methods (the loop, Loop; the
// result, FinishRun; the batch-norm statistics, SyncState; the last word,
// KeepLastWord and KeepEmergencyWriter), the rest is the loop's.
type Job struct {
	*Trainer
	Cfg      Config
	labels   []int64 // the training data's class labels (nil: class k is label k), saved with the weights
	Sched    Schedule
	EpochLen int          // the running epoch's steps (the loop's; a re-dealt epoch has fewer)
	Trace    trace.Tracer // never nil
	ShardIdx int          // which training shard: the rank, or the worker's index under ps (-1: a server)
	Reporter int          // the rank that prints epoch lines and writes --metrics

	Resume         *Resumed // the state to start from (nil: fresh)
	interrupted    bool     // the loop stopped on Stop
	stoppedAt      Position // where it stopped
	lastCheckpoint string   // the file last written (reporting rank)
	// ckptSeen: the checkpoint files prune has judged; ckptSize: the
	// largest this job wrote (checkpoint.go).
	ckptSeen map[string]ckptSeen
	ckptSize int64
	augEpoch int // the epoch of the step the loop runs (augmentation)
	// lastCheckpointSteps is the position (steps run) of the last
	// checkpoint, on every training rank (-1: none yet).
	lastCheckpointSteps int
	// trainSrc is the training set (dense data), for the rows of a
	// re-dealt epoch (reshard.go); partRows are this rank's rows in it,
	// partLens every rank's count (nil outside such an epoch).
	trainSrc           data.DenseSource
	partRows, partLens []int
	// askedBatch is Config.Batch as given (cfg.Batch is capped at the
	// largest shard, and is the step's rows: Accumulate micro-batches);
	// Micro is a micro-batch's rows, what the model holds.
	Micro      int
	askedBatch int
	// LW keeps the state of the last step boundary for LastWord (nil:
	// not kept).
	LW *lastWord
	// stepped: FirstStep has been called.
	stepped bool
	// lrs is the learning-rate plan (schedule.go; nil: every step has
	// Opt.LR), epochLR the rates of the epoch's steps so far.
	lrs     *LRPlan
	epochLR []float32
}

func (j *Job) Reports() bool { return j.Comm.Rank() == j.Reporter }

// warnf writes one warning line to Warnings.
func (j *Job) warnf(format string, args ...any) {
	if j.Warnings != nil {
		fmt.Fprintf(j.Warnings, "dml: rank %d: warning: "+format+"\n", append([]any{j.Comm.Rank()}, args...)...)
	}
}

// printf prints on the reporting rank.
func (j *Job) printf(format string, args ...any) {
	if j.Reports() && j.Out != nil {
		fmt.Fprintf(j.Out, format, args...)
	}
}

// stepBatch is the rows a rank takes per step: batch, times accumulate
// micro-batches (saturating: newSchedule caps it at a shard).
func stepBatch(batch, accumulate int) int {
	if accumulate <= 1 {
		return batch
	}
	if batch > math.MaxInt/accumulate {
		return math.MaxInt
	}
	return batch * accumulate
}

// newSchedule is the schedule of n training samples on ranks ranks at
// batch per rank. A batch larger than the largest shard takes the whole
// shard at each step (one step per epoch, the same steps as a batch of
// exactly the shard): the schedule keeps that, so that no product of the
// batch and the ranks can overflow however large --batch is (2^62 on 4
// ranks divided by zero; MaxInt ran 0 steps).
func newSchedule(n, ranks, batch int) Schedule {
	if n > 0 && ranks > 0 {
		batch = min(batch, data.ShardLen(n, 0, ranks)) // shard 0 is the largest
	}
	return Schedule{N: n, Ranks: ranks, Batch: max(batch, 1)}
}

// ckptSeen is what prune knows of a file: its size and time when it was
// read, and whether it decoded as a checkpoint.
type ckptSeen struct {
	size  int64
	mtime time.Time
	valid bool
}

// Resumed is the state a job starts from, on this rank.
type Resumed struct {
	Position
	// State: the weights, the optimizer's state, and a network's
	// batch-norm running statistics (Buffers; nil: none).
	model.State
	// Own is this rank's own model and optimizer state (dpsgd).
	Own []float32
	// Residues are this worker's filter Residues, one per filter (nil
	// entries for filters without one).
	Residues [][]float32
	// Clock is the ps workers' clock to resume at: Steps, or under
	// Downpour the checkpoint's Pushes.
	Clock int
}
