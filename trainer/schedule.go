package trainer

import (
	"fmt"
	"math"
	"strconv"
	"strings"
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

// LRSchedule is a parsed --lr-schedule.
type LRSchedule struct {
	Kind       string // constant, step or cosine
	Milestones []int  // step: the epochs after which the rate drops
	Gamma      float64
}

// ParseLRSchedule reads "constant" (or ""), "step:E1,E2,…:GAMMA" or
// "cosine".
func ParseLRSchedule(s string) (LRSchedule, error) {
	switch {
	case s == "" || s == "constant":
		return LRSchedule{Kind: "constant"}, nil
	case s == "cosine":
		return LRSchedule{Kind: "cosine"}, nil
	case strings.HasPrefix(s, "step:"):
		parts := strings.Split(s, ":")
		if len(parts) != 3 {
			return LRSchedule{}, fmt.Errorf("%q: want step:E1,E2,…:GAMMA", s)
		}
		sc := LRSchedule{Kind: "step"}
		for _, f := range strings.Split(parts[1], ",") {
			e, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || e < 1 {
				return LRSchedule{}, fmt.Errorf("%q: milestone %q is not an epoch (1, 2, …)", s, f)
			}
			if n := len(sc.Milestones); n > 0 && e <= sc.Milestones[n-1] {
				return LRSchedule{}, fmt.Errorf("%q: milestones must increase", s)
			}
			sc.Milestones = append(sc.Milestones, e)
		}
		g, err := strconv.ParseFloat(parts[2], 64)
		if err != nil || !(g > 0) || math.IsInf(g, 0) {
			return LRSchedule{}, fmt.Errorf("%q: gamma %q must be a positive number", s, parts[2])
		}
		sc.Gamma = g
		return sc, nil
	}
	return LRSchedule{}, fmt.Errorf("%q: unknown schedule (want constant, step:E1,E2,…:GAMMA or cosine)", s)
}

// lrPlan is the rate of every step of a job.
type lrPlan struct {
	sched        LRSchedule
	base, target float64 // Opt.LR and the rate after the warm-up
	warmup       float64 // epochs
	from         float64 // the warm-up's first rate
	epochs       float64
}

// newLRPlan is the plan of cfg for ranks training ranks.
func newLRPlan(cfg Config, ranks int) lrPlan {
	sc, _ := ParseLRSchedule(cfg.LRSchedule) // validated with the Config
	p := lrPlan{sched: sc, base: float64(cfg.Opt.LR), warmup: cfg.WarmupEpochs, epochs: float64(cfg.Epochs)}
	p.target = p.base
	if cfg.LRScaleRanks {
		p.target = p.base * float64(ranks)
		p.from = p.base
	}
	return p
}

// constant: every step has Opt.LR (the plan changes nothing).
func (p lrPlan) constant() bool {
	return p.sched.Kind == "constant" && p.warmup == 0 && p.target == p.base
}

// at is the rate at fractional epoch e (0 at the first step).
func (p lrPlan) at(e float64) float32 {
	if e < p.warmup {
		return float32(p.from + (p.target-p.from)*e/p.warmup)
	}
	lr := p.target
	switch p.sched.Kind {
	case "step":
		for _, m := range p.sched.Milestones {
			if e >= float64(m) {
				lr *= p.sched.Gamma
			}
		}
	case "cosine":
		if span := p.epochs - p.warmup; span > 0 {
			lr *= (1 + math.Cos(math.Pi*min(e-p.warmup, span)/span)) / 2
		}
	}
	return float32(lr)
}

// epochAt is the fractional epoch of step `step` (from 0) of epoch `epoch`
// (from 1) of steps steps.
func epochAt(epoch, step, steps int) float64 {
	return float64(epoch-1) + float64(step)/float64(max(steps, 1))
}

// setStep gives the step about to run its rate and count (Strategy's
// setStep, which every strategy has: none can drop the schedule
// silently).
func (j *job) setStep(s Strategy, lr float32, t int) { s.setStep(lr, t) }

// epochSteps is the number of steps of the epoch pos is in: the
// schedule's, or the rest of a re-dealt epoch's (reshard.go).
func (j *job) epochSteps(pos Position) int {
	if len(pos.Reshard) == 0 {
		return j.sched.stepsPerEpoch()
	}
	parts := epochParts(j.sched.n, j.cfg.Seed, pos.Epoch, j.cfg.Shuffle, pos.Reshard, j.sched.ranks)
	return partSteps(parts, j.cfg.Batch)
}

// serverLR is a ps server's rate for the step of the given clock (the
// pushes a worker made before it: under bsp the round), from start: the
// rate the workers' loops give that step.
func (j *job) serverLR(start Position) func(clock int) float32 {
	if j.lrs == nil {
		return nil
	}
	plan, at := *j.lrs, j.positions(start)
	return func(clock int) float32 {
		pos, steps := at(clock)
		return plan.at(epochAt(pos.Epoch, pos.Step, steps))
	}
}
