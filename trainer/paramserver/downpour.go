package paramserver

import (
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/config"
	"github.com/dml-project/dml/trainer/engine"
)

// Downpour SGD's n_fetch and n_push (Dean et al. 2012, "Large Scale
// Distributed Deep Networks", §4.1; issue 21): --fetch-every F and
// --push-every P under --sync ps, on the dense models. A worker (a model
// replica in the paper) keeps its own copy of the weights:
//
//   - at a step where a fetch is due (the first step, then every F steps)
//     it replaces its copy with the servers' weights (a Pull);
//   - at every step it computes its gradient g on its copy, adds g to the
//     gradient accumulated since its last push, and steps its copy with
//     plain SGD at the step's learning rate: w ← w − lr·g (no momentum,
//     no weight decay: the servers run the configured rule on what is
//     pushed, Adagrad in the paper);
//   - every P steps it pushes the accumulated sum (one Push, one clock
//     tick) and starts a new sum.
//
// g is the gradient the worker would push with P = 1, scaled as psWorker's
// scale says; the local step applies exactly that, as the paper's
// replica does (its Algorithm 7.1 steps its parameters by α·Δw and adds
// Δw to the accrued gradient). Under ssp, asp and dssp, where each push
// carries 1/W of the worker's mean gradient, a worker's local step is
// therefore W times smaller than a lone replica's would be: its copy
// follows what the servers would do with its pushes alone.
//
// Where the period ends early (so that nothing a worker computed is lost
// and a checkpoint holds the whole state):
//
//   - at the end of every epoch (and of training: --max-steps, a stop)
//     the worker pushes what it has accumulated and fetches, so that the
//     epoch's evaluation sees the servers' weights and periods never span
//     epochs;
//   - at a checkpoint every worker pushes what it has accumulated before
//     the reporting worker snapshots the servers, and fetches at its next
//     step. A resumed run fetches at its first step too, so resuming is
//     bit-exact under bsp with a straight run that writes the same
//     checkpoints. The checkpoint records the workers' clock (pushes,
//     checkpointMeta.Pushes), which no longer equals the steps run.
//
// The consistency models see pushes only: a worker's clock is its number
// of pushes, as before. Under ssp, asp and dssp F and P are free; the
// staleness bounds count pushes, not steps. Under bsp a round is one
// period: F = P steps, one push and one fetch, the servers averaging the
// workers' sums (local SGD with periodic averaging of the updates). F ≠ P
// under bsp is refused, the simplest rule that keeps a round a round: a
// fetch between pushes would only bring back the last round's weights (a
// round trip for nothing), and pushes without a fetch would join rounds
// with sums computed from older weights, which is what ssp and asp are
// for.
//
// Departures from the paper: the fetch and push counters restart at the
// epoch ends and checkpoints above; the local step is plain SGD (the paper
// does not say which rule the replica uses locally, its pseudocode shows
// SGD); a fetch is one synchronous Pull before the step, not a
// background thread's; and a learning-rate schedule or warm-up is refused
// with P > 1, because the servers take a push's rate from its clock
// (serverLR), which then no longer counts steps.

// validateDownpour reports the settings --fetch-every and --push-every
// cannot train with (c.Sync is ps).
func validateDownpour(c engine.Config) error {
	p := c.PS
	if !p.Downpour() {
		return nil
	}
	switch {
	case c.Model == engine.SparseLogreg:
		return config.Bad("PS.PushEvery", "%d, Config.PS.FetchEvery %d: sparse-logreg pulls and pushes the keys of each batch; Downpour's periods are for the dense models", p.PushPeriod(), p.FetchPeriod())
	case p.Consistency == ps.BSP && p.FetchPeriod() != p.PushPeriod():
		return config.Bad("PS.PushEvery", "%d differs from Config.PS.FetchEvery %d: under bsp a round is one push and one fetch, so they must be equal (or use ssp, asp or dssp)", p.PushPeriod(), p.FetchPeriod())
	case p.PushPeriod() > 1 && !engine.NewLRPlan(c, 1).ConstantInTime():
		return config.Bad("PS.PushEvery", "%d with a learning-rate schedule or warm-up (Config.LRSchedule %q, Config.WarmupEpochs %v): the servers pick a push's rate by its clock, which counts pushes, not steps", p.PushPeriod(), c.LRSchedule, c.WarmupEpochs)
	}
	return nil
}

// downpour is a dense worker's state under --fetch-every/--push-every.
type downpour struct {
	fetchEvery, pushEvery int
	sinceFetch, sincePush int       // steps since the last fetch and push
	fetch                 bool      // the next step fetches
	acc                   []float32 // the gradients since the last push
	lr                    float32   // the current step's rate (setStep)
}

// ForceDownpour (tests) takes the Downpour path with periods of 1.
var ForceDownpour bool

func newDownpour(p engine.PSConfig, n int, lr float32) *downpour {
	if !p.Downpour() && !ForceDownpour {
		return nil
	}
	return &downpour{fetchEvery: p.FetchPeriod(), pushEvery: p.PushPeriod(), fetch: true, acc: make([]float32, n), lr: lr}
}
