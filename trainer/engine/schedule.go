package engine

import (
	"math"
)

// Learning-rate schedules (issue 21): the rate of every step is a function
// of where the step is in training, the fractional epoch e (epoch-1 plus
// the step's share of its epoch, at the step's start), and of the number
// of ranks that train:
//
//	target  = Opt.LR, times the training ranks with LRScaleRanks (the
//	          linear scaling rule, Goyal et al. 2017)
//	warm-up = for e < WarmupEpochs, linear from a start to target, reached
//	          at e = WarmupEpochs: with LRScaleRanks from the unscaled
//	          Opt.LR (Goyal et al.'s "gradual warmup", from η to kη),
//	          otherwise from 0
//	then    = constant: target;
//	          step:E1,E2,…:γ: target × γ^(milestones E_i ≤ e, counted in
//	          whole epochs: the rate drops at the first step of epoch
//	          E_i+1, as PyTorch's MultiStepLR stepped once an epoch);
//	          cosine: target × (1 + cos(π·(e−W)/(E−W)))/2 over the epochs
//	          after the warm-up (PyTorch's CosineAnnealingLR with
//	          eta_min 0, stepped every step).
//
// The rate is computed in float64 and rounded once to float32.

// LRPlan is the rate of every step of a job.
type LRPlan struct {
	Sched        LRSchedule
	base, target float64 // Opt.LR and the rate after the warm-up
	Warmup       float64 // epochs
	from         float64 // the warm-up's first rate
	epochs       float64
}

// NewLRPlan is the plan of cfg for ranks training ranks.
func NewLRPlan(cfg Config, ranks int) LRPlan {
	sc, _ := ParseLRSchedule(cfg.LRSchedule) // validated with the Config
	p := LRPlan{Sched: sc, base: float64(cfg.Opt.LR), Warmup: cfg.WarmupEpochs, epochs: float64(cfg.Epochs)}
	p.target = p.base
	if cfg.LRScaleRanks {
		p.target = p.base * float64(ranks)
		p.from = p.base
	}
	return p
}

// ConstantInTime: every step has the same rate (LRScaleRanks may scale it).
func (p LRPlan) ConstantInTime() bool { return p.Sched.Kind == "constant" && p.Warmup == 0 }

// constant: every step has Opt.LR (the plan changes nothing).
func (p LRPlan) constant() bool {
	return p.Sched.Kind == "constant" && p.Warmup == 0 && p.target == p.base
}

// At is the rate At fractional epoch e (0 At the first step).
func (p LRPlan) At(e float64) float32 {
	if e < p.Warmup {
		return float32(p.from + (p.target-p.from)*e/p.Warmup)
	}
	lr := p.target
	switch p.Sched.Kind {
	case "step":
		for _, m := range p.Sched.Milestones {
			if e >= float64(m) {
				lr *= p.Sched.Gamma
			}
		}
	case "cosine":
		if span := p.epochs - p.Warmup; span > 0 {
			lr *= (1 + math.Cos(math.Pi*min(e-p.Warmup, span)/span)) / 2
		}
	}
	return float32(lr)
}

// EpochAt is the fractional epoch of step `step` (from 0) of epoch `epoch`
// (from 1) of steps steps.
func EpochAt(epoch, step, steps int) float64 {
	return float64(epoch-1) + float64(step)/float64(max(steps, 1))
}

// setStep gives the step about to run its rate and count (Strategy's
// setStep, which every strategy has: none can drop the schedule
// silently).
func (j *Job) setStep(s Strategy, lr float32, t int) { s.SetStep(lr, t) }

// epochSteps is the number of steps of the epoch pos is in: the
// schedule's, or the rest of a re-dealt epoch's (reshard.go).
func (j *Job) epochSteps(pos Position) int {
	if len(pos.Reshard) == 0 {
		return j.Sched.StepsPerEpoch()
	}
	parts := epochParts(j.Sched.N, j.Cfg.Seed, pos.Epoch, j.Cfg.Shuffle, pos.Reshard, j.Sched.Ranks)
	return partSteps(parts, j.Cfg.Batch)
}

// ServerLR is a ps server's rate for the step of the given clock (the
// pushes a worker made before it: under bsp the round), from start: the
// rate the workers' loops give that step.
func (j *Job) ServerLR(start Position) func(clock int) float32 {
	if j.lrs == nil {
		return nil
	}
	plan, at := *j.lrs, j.positions(start)
	return func(clock int) float32 {
		pos, steps := at(clock)
		return plan.At(EpochAt(pos.Epoch, pos.Step, steps))
	}
}

// PositionAfter is the Position the training ranks reach from start after
// steps steps in all (steps >= start.Steps), as the step loop advances it:
// through the rest of a re-dealt epoch, then whole epochs.
func (j *Job) PositionAfter(start Position, steps int) Position {
	pos, _ := j.positions(start)(steps)
	return pos
}

// positions is positionAfter from start, with the steps of the epoch the
// position is in; the start epoch's are worked out once (a re-dealt
// epoch's take a permutation of the data).
func (j *Job) positions(start Position) func(steps int) (Position, int) {
	first := j.epochSteps(start)
	per := func(pos Position) int {
		if pos.Epoch == start.Epoch {
			return first
		}
		return j.Sched.StepsPerEpoch()
	}
	return func(steps int) (Position, int) {
		pos := start
		for pos.Steps < steps {
			left := per(pos) - pos.Step
			if n := steps - pos.Steps; n < left {
				pos.Step += n
				pos.Steps = steps
				return pos, per(pos)
			}
			pos = Position{Epoch: pos.Epoch + 1, Steps: pos.Steps + max(left, 0)}
		}
		return pos, per(pos)
	}
}
