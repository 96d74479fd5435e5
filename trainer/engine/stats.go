package engine

import "math"

// What training measures and reports: a step's figures, an epoch's, the
// parameter server's and gossip's, an evaluation's, and what the loss
// and accuracy cover (Scope).

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

// EpochStats is one epoch's line: what rank 0 prints and --metrics records.
type EpochStats struct {
	Epoch     int      `json:"epoch"`
	Steps     int      `json:"steps"`
	LossScope Scope    `json:"loss_scope"` // what Loss and TrainAcc cover: "global" (every rank's samples, allreduce) or "worker" (the reporting worker's own, ps)
	Loss      float64  `json:"loss"`       // mean training loss over the epoch's samples (in LossScope)
	TrainAcc  float64  `json:"train_acc"`  // accuracy on the epoch's training batches (in LossScope)
	TestAcc   *float64 `json:"test_acc"`   // null when not evaluated this epoch
	// TestLoss is the mean loss over the test set (per token for a text:
	// its perplexity is e^TestLoss), where evaluated.
	TestLoss      *float64 `json:"test_loss,omitempty"`
	SamplesPerSec float64  `json:"samples_per_sec"`
	CommFraction  float64  `json:"comm_fraction"` // share of step time spent in the gradient AllReduce (mean over ranks), or in Pull and Push (ps)
	// CommHidden is the share of the AllReduce time that ran while the
	// backward pass was still running (mean over ranks; allreduce with
	// overlap only, else null): 1 − CommHidden of it was waited for.
	CommHidden *float64 `json:"comm_hidden"`
	WallSec    float64  `json:"wall_sec"`
	// SeqLen is a text's tokens per sample (0: not a text): the line then
	// shows tokens/s, the test loss and perplexity (Loss and TrainAcc are
	// per token).
	SeqLen int `json:"seq_len,omitempty"`
	// TokensPerSec (SamplesPerSec × SeqLen) and Perplexity (e^TestLoss)
	// are a text's, as the line shows them (withText).
	TokensPerSec *float64 `json:"tokens_per_sec,omitempty"`
	Perplexity   *float64 `json:"ppl,omitempty"`
	// TrainSec is the epoch's training time: WallSec without the evaluation.
	TrainSec float64 `json:"train_sec"`
	// LR is the learning rate of each of the epoch's steps (with
	// --lr-schedule, --warmup-epochs or --lr-scale-ranks; omitted when
	// every step has --lr).
	LR []float32 `json:"lr,omitempty"`
	// BytesPerStep is the payload the reporting rank sent per step of the
	// epoch: its AllReduces (allreduce, local SGD's averagings), its
	// pushes and pulls (ps), its models to its neighbours (dpsgd).
	// Omitted where not counted (adpsgd).
	BytesPerStep *float64 `json:"bytes_per_step,omitempty"`
	// LossScale is the loss scale at the epoch's end, and SkippedSteps the
	// steps skipped in it for a gradient that overflowed (with
	// --loss-scale; trainer/allreduce/lossscale.go).
	LossScale    *float64 `json:"loss_scale,omitempty"`
	SkippedSteps int      `json:"skipped_steps,omitempty"`
	// Parameter-server figures of the reporting worker (with --sync ps).
	*PSStats
	// Decentralized training's figures (with --sync dpsgd, adpsgd).
	*GossipStats
}

// PSStats is what parameter-server workers measured: per epoch for the
// reporting worker (EpochStats) or for the whole run over all workers
// (Result.PS).
type PSStats struct {
	MaxStaleness  int     `json:"max_staleness"`  // largest staleness seen at a pull
	StalenessHist []int   `json:"staleness_hist"` // [s] = pulls that saw staleness s
	WaitSec       float64 `json:"wait_sec"`       // time blocked in Pull and Push
	PushesPerSec  float64 `json:"pushes_per_sec"`
	PullsPerSec   float64 `json:"pulls_per_sec"`
	BytesSent     int64   `json:"bytes_sent"`     // all request bytes
	BytesReceived int64   `json:"bytes_received"` // all reply bytes (the pulls' weights)
	// PushBytes is what the pushes took on the wire after the filters,
	// PushBytesUnfiltered what they would have taken without them.
	PushBytes           int64 `json:"push_bytes"`
	PushBytesUnfiltered int64 `json:"push_bytes_unfiltered"`
}

// GossipStats are the figures of decentralized training (--sync dpsgd,
// adpsgd) in an epoch's line.
type GossipStats struct {
	// Consensus is the consensus distance at the epoch's end: the mean over
	// ranks of ‖x_i − x̄‖ / ‖x̄‖, x̄ the average of the ranks' models.
	Consensus float64 `json:"consensus_dist"`
	// Averagings counts the reporting rank's model averagings in the epoch
	// (dpsgd: one per step; local SGD: one per --local-steps steps and
	// one at the epoch's end).
	Averagings int `json:"averagings"`
	// AveragingsPerSec counts the reporting rank's model averagings (one
	// per step under dpsgd; those it started or answered under adpsgd).
	AveragingsPerSec float64 `json:"averagings_per_sec"`
	// PartnerWaitSec is the reporting rank's time waiting for its
	// partners' models (not hidden behind its own computation).
	PartnerWaitSec float64 `json:"partner_wait_sec"`
}

// EvalResult is a model's score on a dataset, over all ranks.
type EvalResult struct {
	Samples  int
	Accuracy float64
	Loss     float64 // mean loss per sample
	// Interrupted: a rank's evaluation was cut short by a stop signal
	// (model.Model.Interrupt); Accuracy and Loss are NaN.
	Interrupted bool
}

// withText is e with a text's tokens/s and perplexity filled in (none
// where SeqLen is 0).
func (e EpochStats) withText() EpochStats {
	if e.SeqLen > 0 {
		tps := e.SamplesPerSec * float64(e.SeqLen)
		e.TokensPerSec = &tps
		if e.TestLoss != nil {
			ppl := math.Exp(*e.TestLoss)
			e.Perplexity = &ppl
		}
	}
	return e
}
