package allreduce

import (
	"fmt"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer/decentral"
	"github.com/dml-project/dml/trainer/engine"
	"github.com/dml-project/dml/trainer/trace"
)

// localSGDStrategy is local SGD, or periodic model averaging (--sync
// allreduce --local-steps H, H > 1): every rank steps its own model with
// its own gradient (the mean over its own batch) and its own optimizer
// state, and every H steps the ranks replace their models by their mean,
// one AllReduce of the weights: H times fewer AllReduces than synchronous
// training, each as large. The period restarts with each epoch, whose last
// step always averages, so every epoch ends with one model.
//
// As in Lin et al. ("Don't Use Large Mini-Batches, Use Local SGD", ICLR
// 2020) and Stich ("Local SGD Converges Fast and Communicates Little",
// ICLR 2019), the optimizer states (momentum, Adam's moments) stay each
// rank's own and are not averaged. It is DistBelief's Downpour with
// n_fetch = n_push = H and the server replaced by an AllReduce, and
// D-PSGD's averaging on a complete graph done every H steps instead of
// every step.
//
// It is the decentralized strategies' kind of training (a localModel per
// rank): its checkpoints hold every rank's own model and optimizer state
// and their average (resuming on as many ranks gives each its own back,
// on another number everyone starts from the average), the loss and
// accuracy printed are the reporting rank's own batches' (ScopeWorker),
// and the test accuracy is the average model's.
type localSGDStrategy struct {
	*decentral.LocalModel
	h       int
	ar      *collectives.Allreducer // the averagings'
	waitSec float64                 // this epoch's time in the averaging AllReduce
	avgs    int                     // this epoch's averagings
}

// LocalSGDTest makes --local-steps 1 run local SGD (tests: averaging after
// every step is synchronous SGD).
var LocalSGDTest bool

func newLocalSGD(j *engine.Job, d engine.DenseSetup) (*localSGDStrategy, error) {
	l, err := decentral.NewLocalModel(j, d.M, d.Shard, d.TestShard, d.Params, true)
	if err != nil {
		return nil, err
	}
	return &localSGDStrategy{LocalModel: l, h: max(1, j.Cfg.LocalSteps), ar: collectives.NewAllreducer(j.Comm, j.Cfg.Allreduce)}, nil
}

func (s *localSGDStrategy) Local() *decentral.LocalModel { return s.LocalModel }
func (s *localSGDStrategy) Close()                       { s.Free() }

func (s *localSGDStrategy) Describe() string {
	return fmt.Sprintf("%s, local SGD: each rank steps its own model, models averaged (allreduce %s) every %d steps and at each epoch's end, backend %s",
		s.DescribeLocal(), s.Job.Cfg.Allreduce, s.h, kernels.Describe(s.Job.Backend))
}

func (s *localSGDStrategy) sentBytes() int64 { return s.ar.Sent }

func (s *localSGDStrategy) Hooks() engine.Hooks {
	h := s.LocalModel.Hooks()
	h.SentBytes = s.sentBytes
	return h
}

func (s *localSGDStrategy) Prepare(idx []int, _ int) error { return s.LoadBatch(idx) }

// Exchange applies the rank's gradient to its own model and, at the end
// of a period or of the epoch, averages the models.
func (s *localSGDStrategy) Exchange(step int) (engine.StepStats, error) {
	st, err := s.StepStats(s.N)
	if err != nil {
		return engine.StepStats{}, err
	}
	if err := s.Update(); err != nil {
		return engine.StepStats{}, err
	}
	// Steps h−1, 2h−1, … of the epoch average, and its last: a function
	// of the position, so a resumed run averages where a straight one does.
	if (step+1)%s.h != 0 && step+1 < s.Job.EpochLen {
		return st, nil
	}
	t0 := time.Now()
	sp := s.Job.Trace.Begin("average").Cat(trace.Collective).Bytes(4 * len(s.X))
	err = s.ar.Allreduce(s.X, collectives.Avg)
	sp.Err(err).End()
	if err != nil {
		return engine.StepStats{}, fmt.Errorf("averaging the ranks' models: %w", err)
	}
	if !s.Shared {
		if err := s.Job.Backend.Upload(s.M.Params, s.X); err != nil {
			return engine.StepStats{}, err
		}
	}
	st.CommSec = time.Since(t0).Seconds()
	s.waitSec += st.CommSec
	s.avgs++
	return st, nil
}

// EndEpoch: as dpsgd's (localModel.endEpoch), the waiting being the
// averagings' AllReduces.
func (s *localSGDStrategy) EndEpoch(st *engine.EpochStats, commSec, stepSec, wallSec float64) error {
	err := s.FillEpoch(st, commSec, stepSec, wallSec, s.avgs, s.waitSec)
	s.avgs, s.waitSec = 0, 0
	return err
}

// Evaluate measures the average model (EndEpoch's).
func (s *localSGDStrategy) Evaluate() (engine.EvalResult, error) { return s.EvaluateConsensus() }
