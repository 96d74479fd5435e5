package optim

import (
	"math"
	"strconv"
)

// The constants of one Adam or LARS update, computed once on the host
// (the element-wise rules and the device kernels take them).

// AdamStep is one Adam or AdamW update's constants, computed once on the
// host in float64 and rounded to float32 as PyTorch (1.13, single-tensor
// path) rounds its Python scalars: 1−β1, 1−β2, lr/(1−β1^t),
// √(1−β2^t), and AdamW's decay factor 1 − lr·wd. A device kernel takes
// the same values, so that it computes the same bits.
type AdamStep struct {
	Beta1, OneMinusBeta1, Beta2, OneMinusBeta2 float32
	StepSize, BiasCorrection2Sqrt, Eps         float32
	WeightDecay                                float32 // Adam: into the gradient
	Decay                                      float32 // AdamW: the weights' factor (1: none)
	Decoupled                                  bool
}

// NewAdamStep is the constants of cfg's update number cfg.Step (< 1 is
// taken as 1). The settings are float32; PyTorch's are the Python floats
// the user typed: each is taken back to its shortest decimal (0.999f to
// 0.999) before the float64 arithmetic, so that 1−β2 is 0.001 as there,
// not 1−0.999f (1.3e-5 away).
func NewAdamStep(cfg Config) AdamStep {
	t := float64(max(cfg.Step, 1))
	b1, b2, lr := decimal(cfg.Beta1), decimal(cfg.Beta2), decimal(cfg.LR)
	a := AdamStep{
		Beta1: cfg.Beta1, OneMinusBeta1: float32(1 - b1), Beta2: cfg.Beta2, OneMinusBeta2: float32(1 - b2),
		StepSize:            float32(lr / (1 - math.Pow(b1, t))),
		BiasCorrection2Sqrt: float32(math.Sqrt(1 - math.Pow(b2, t))),
		Eps:                 cfg.Eps, Decay: 1,
	}
	if cfg.Kind == AdamW {
		a.Decoupled, a.Decay = true, float32(1-lr*decimal(cfg.WeightDecay))
	} else {
		a.WeightDecay = cfg.WeightDecay
	}
	return a
}

// decimal is x's shortest decimal as a float64 (0.999f: 0.999).
func decimal(x float32) float64 {
	d, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
	return d
}

// LARSStep is one LARS update's settings: the float64 ones the trust
// ratio is computed with (the float32 settings taken back to their
// shortest decimals, as NewAdamStep does: 0.001f to 0.001), and the
// float32 ones of the element-wise step. A device kernel takes the same
// values, so that it computes the same bits.
type LARSStep struct {
	LR, TrustCoef, WeightDecay64 float64
	Momentum, WeightDecay        float32
}

// NewLARSStep is the constants of cfg's LARS update.
func NewLARSStep(cfg Config) LARSStep {
	return LARSStep{LR: decimal(cfg.LR), TrustCoef: decimal(cfg.TrustCoef), WeightDecay64: decimal(cfg.WeightDecay),
		Momentum: cfg.Momentum, WeightDecay: cfg.WeightDecay}
}

// Rate is one tensor's lr·trust, from its weights' and gradient's sums of
// squares (SumSquares): trust = η·‖w‖/(‖g‖ + wd·‖w‖), 1 where either sum
// is 0 (or not > 0: a NaN gradient gives trust 1 and NaN weights, which
// the non-finite checks stop), in float64, rounded once to float32.
func (s *LARSStep) Rate(sw, sg float64) float32 {
	trust := 1.0
	if sw > 0 && sg > 0 {
		nw, ng := math.Sqrt(sw), math.Sqrt(sg)
		// The conversion keeps Go from fusing wd·‖w‖ + ‖g‖ (as a
		// device's __dadd_rn(__dmul_rn()) does not).
		trust = s.TrustCoef * nw / (ng + float64(s.WeightDecay64*nw))
	}
	return float32(s.LR * trust)
}
