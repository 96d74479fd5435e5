package allreduce

import (
	"fmt"
	"math"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer/config"
	"github.com/dml-project/dml/trainer/engine"
)

// Loss scaling (Config.LossScale; --loss-scale, on by default with
// --precision fp16), as PyTorch's GradScaler does it: the loss's gradient
// is multiplied by S before the backward pass, so that gradients too small
// for half precision's products survive them, and the summed gradient is
// divided by S before the optimizer. Under dynamic scaling a step whose
// reduced gradient (or loss) holds a NaN or ±Inf is skipped — no update,
// on every rank alike, since every rank checks the same sum — and S is
// halved; after growthInterval finite steps in a row S is doubled. S stays
// a power of two, so dividing by it is exact.
//
// It runs under --sync allreduce (every rank steps from the same sum, so
// the skip is agreed without a message); the other strategies step from
// gradients or models no two ranks share, and refuse it (Validate).
//
// Departures from GradScaler: the optimizer's step count (Adam's bias
// correction, the LR schedule) advances on a skipped step too, as it is
// the loop's step; and a scale that would fall below config.MinLossScale stops
// training as diverged instead of going on halving.

// growthInterval is how many finite steps in a row double S
// (GradScaler's growth_interval).
const growthInterval = 2000

// lossScaler is a run's S and its counters.
type lossScaler struct {
	scale   float32
	dynamic bool
	good    int // finite steps since S last changed
	skipped int // steps skipped since the last epochStats
}

// parseLossScale is Config.LossScale's scaler: nil without scaling.
func parseLossScale(s string) (*lossScaler, error) {
	spec, err := config.ParseLossScale(s)
	if err != nil || spec.Scale == 0 {
		return nil, err
	}
	return &lossScaler{scale: spec.Scale, dynamic: spec.Dynamic}, nil
}

// factor is what the loss's gradient is multiplied by (1 without scaling).
func (l *lossScaler) factor() float32 {
	if l == nil {
		return 1
	}
	return l.scale
}

// unscale divides the reduced gradient by S (before clipping and the
// update).
func (l *lossScaler) unscale(b kernels.Backend, grad kernels.Buffer) error {
	if l == nil || l.scale == 1 {
		return nil
	}
	return b.Scale(1/l.scale, grad)
}

// overflow is told that the step's reduced gradient or loss was not
// finite: under dynamic scaling the step is skipped and S halved (nil);
// a static S, or one that would fall below config.MinLossScale, is an error
// wrapping ErrNonFinite (cause: the usual message naming the layers).
func (l *lossScaler) overflow(cause error) error {
	if !l.dynamic {
		return fmt.Errorf("at the static loss scale %g: %w", l.scale, cause)
	}
	if l.scale/2 < config.MinLossScale {
		return fmt.Errorf("the gradient overflows even at loss scale %g: %w", l.scale, cause)
	}
	l.scale /= 2
	l.good = 0
	l.skipped++
	return nil
}

// finite is told that the step's gradient was finite (and applied).
func (l *lossScaler) finite() {
	if l == nil || !l.dynamic {
		return
	}
	if l.good++; l.good >= growthInterval && l.scale*2 <= config.MaxLossScale {
		l.scale *= 2
		l.good = 0
	}
}

// epochStats adds S and the steps skipped since the last call to st.
func (l *lossScaler) epochStats(st *engine.EpochStats) {
	if l == nil {
		return
	}
	s := float64(l.scale)
	st.LossScale, st.SkippedSteps = &s, l.skipped
	l.skipped = 0
}

// skippedStats is a skipped step's figures: its loss and correct count
// where the forward pass gave a finite loss (the backward pass is what
// overflowed), none where it did not.
func skippedStats(st engine.StepStats) engine.StepStats {
	if math.IsNaN(st.LossSum) || math.IsInf(st.LossSum, 0) {
		return engine.StepStats{}
	}
	return st
}
