package optim

import (
	"fmt"
	"math"
)

// Config picks an update rule and its hyper-parameters (PyTorch's
// definitions: weight decay is added to the gradient before the rule).
// Momentum is read only by the Momentum rule, Eps by Adagrad, Adam and
// AdamW, Beta1 and Beta2 by Adam and AdamW, Momentum and TrustCoef by
// LARS.
type Config struct {
	Kind        Kind    `json:"kind"`
	LR          float32 `json:"lr"`
	Momentum    float32 `json:"momentum"`
	WeightDecay float32 `json:"weight_decay"`
	Eps         float32 `json:"eps"`
	// Beta1 and Beta2 are Adam's and AdamW's moment decays (PyTorch's
	// betas; 0.9 and 0.999 there). Read only by those rules.
	Beta1 float32 `json:"beta1,omitempty"`
	Beta2 float32 `json:"beta2,omitempty"`
	// TrustCoef is LARS's trust coefficient η (0.001 in You et al.).
	// Read only by LARS.
	TrustCoef float32 `json:"trust_coef,omitempty"`
	// Step is the count of the update being applied, from 1 (Adam's bias
	// correction): the caller's to set before each update, not a
	// setting (not saved; a checkpoint's position gives it back).
	Step int `json:"-"`
}

// Adam's defaults (PyTorch's).
const (
	DefaultBeta1   = 0.9
	DefaultBeta2   = 0.999
	DefaultAdamEps = 1e-8
)

// DefaultTrustCoef is LARS's trust coefficient η unless given (You et
// al.'s 0.001).
const DefaultTrustCoef = 0.001

// Validate reports the first bad setting as a *SettingError wrapping
// ErrConfig: an unknown kind, LR not a finite value > 0, Momentum outside
// [0, 1), WeightDecay not a finite value ≥ 0, or Eps not a finite value
// ≥ 0 (> 0 for Adagrad, which divides by it), or (LARS) TrustCoef not a
// finite value > 0. NaN and ±Inf fail every
// check, whichever rule reads the setting: no setting may be one.
func (c Config) Validate() error {
	bad := func(setting, format string, args ...any) error {
		return &SettingError{Setting: setting, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case !c.Kind.Valid():
		return bad("Kind", "unknown optimizer %v (want %s)", c.Kind, wantNames())
	case !(c.LR > 0):
		return bad("LR", "learning rate %v must be greater than 0", c.LR)
	case isInf(c.LR):
		return bad("LR", "learning rate %v must be finite", c.LR)
	case !(c.Momentum >= 0 && c.Momentum < 1):
		return bad("Momentum", "momentum %v must be in [0, 1)", c.Momentum)
	case !(c.WeightDecay >= 0):
		return bad("WeightDecay", "weight decay %v must not be negative", c.WeightDecay)
	case isInf(c.WeightDecay):
		return bad("WeightDecay", "weight decay %v must be finite", c.WeightDecay)
	case !(c.Eps >= 0) || isInf(c.Eps):
		return bad("Eps", "eps %v must be finite and not negative", c.Eps)
	case c.Kind == Adagrad && !(c.Eps > 0):
		return bad("Eps", "adagrad eps %v must be greater than 0", c.Eps)
	case (c.Kind == Adam || c.Kind == AdamW) && !(c.Eps > 0):
		return bad("Eps", "%v eps %v must be greater than 0", c.Kind, c.Eps)
	case (c.Kind == Adam || c.Kind == AdamW) && !(c.Beta1 >= 0 && c.Beta1 < 1):
		return bad("Beta1", "beta1 %v must be in [0, 1)", c.Beta1)
	case (c.Kind == Adam || c.Kind == AdamW) && !(c.Beta2 >= 0 && c.Beta2 < 1):
		return bad("Beta2", "beta2 %v must be in [0, 1)", c.Beta2)
	case c.Kind == LARS && (!(c.TrustCoef > 0) || isInf(c.TrustCoef)):
		return bad("TrustCoef", "lars trust coefficient %v must be finite and greater than 0", c.TrustCoef)
	}
	return nil
}

func isInf(x float32) bool { return math.IsInf(float64(x), 0) }
