package optim

import (
	"errors"
	"fmt"
	"math"
)

// ErrConfig is wrapped by every error Validate and ParseKind return.
var ErrConfig = errors.New("optim: invalid optimizer configuration")

// SettingError reports one bad setting. Setting is the Config field's name
// ("Kind", "LR", "Momentum", "WeightDecay", "Eps"), so that a command line
// can name its own flag; Msg is the message a person reads.
type SettingError struct {
	Setting string
	Msg     string
}

func (e *SettingError) Error() string { return e.Msg }

// Unwrap returns ErrConfig.
func (e *SettingError) Unwrap() error { return ErrConfig }

// Config picks an update rule and its hyper-parameters (PyTorch's
// definitions: weight decay is added to the gradient before the rule).
// Momentum is read only by the Momentum rule, Eps only by Adagrad.
type Config struct {
	Kind        Kind    `json:"kind"`
	LR          float32 `json:"lr"`
	Momentum    float32 `json:"momentum"`
	WeightDecay float32 `json:"weight_decay"`
	Eps         float32 `json:"eps"`
}

// Validate reports the first bad setting as a *SettingError wrapping
// ErrConfig: an unknown kind, LR not a finite value > 0, Momentum outside
// [0, 1), WeightDecay not a finite value ≥ 0, or Eps not a finite value
// ≥ 0 (> 0 for Adagrad, which divides by it). NaN and ±Inf fail every
// check, whichever rule reads the setting: no setting may be one.
func (c Config) Validate() error {
	bad := func(setting, format string, args ...any) error {
		return &SettingError{Setting: setting, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case !c.Kind.Valid():
		return bad("Kind", "unknown optimizer %v (want sgd, momentum or adagrad)", c.Kind)
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
	}
	return nil
}

func isInf(x float32) bool { return math.IsInf(float64(x), 0) }
