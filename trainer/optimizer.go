package trainer

import (
	"fmt"

	"github.com/dml-project/dml/kernels"
)

// Optimizers lists the names NewOptimizer accepts.
var Optimizers = []string{"sgd", "momentum", "adagrad"}

// OptimizerConfig picks an update rule and its hyper-parameters (PyTorch's
// definitions: weight decay is added to the gradient before the rule).
type OptimizerConfig struct {
	Name        string  `json:"name"`
	LR          float32 `json:"lr"`
	Momentum    float32 `json:"momentum"`
	WeightDecay float32 `json:"weight_decay"`
	Eps         float32 `json:"eps"`
}

// Validate reports a bad optimizer setting.
func (c OptimizerConfig) Validate() error {
	switch c.Name {
	case "sgd", "momentum", "adagrad":
	default:
		return fmt.Errorf("unknown optimizer %q (want sgd, momentum or adagrad)", c.Name)
	}
	switch {
	case !(c.LR > 0):
		return fmt.Errorf("learning rate %v must be greater than 0", c.LR)
	case c.Momentum < 0 || c.Momentum >= 1:
		return fmt.Errorf("momentum %v must be in [0, 1)", c.Momentum)
	case c.WeightDecay < 0:
		return fmt.Errorf("weight decay %v must not be negative", c.WeightDecay)
	case c.Name == "adagrad" && !(c.Eps > 0):
		return fmt.Errorf("adagrad eps %v must be greater than 0", c.Eps)
	}
	return nil
}

// Optimizer applies one rule to a flat parameter buffer, keeping its state
// (momentum buffer or Adagrad's sum of squares) on the same backend.
type Optimizer struct {
	Config OptimizerConfig
	b      kernels.Backend
	state  kernels.Buffer
}

// NewOptimizer returns an optimizer for n parameters on b.
func NewOptimizer(cfg OptimizerConfig, b kernels.Backend, n int) (*Optimizer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := &Optimizer{Config: cfg, b: b}
	if cfg.Name != "sgd" {
		o.state = b.Alloc(n)
	}
	return o, nil
}

// Update applies the rule: w ← rule(w, g).
func (o *Optimizer) Update(w, g kernels.Buffer) error {
	c := o.Config
	switch c.Name {
	case "momentum":
		return o.b.Momentum(w, g, o.state, c.LR, c.Momentum, c.WeightDecay)
	case "adagrad":
		return o.b.Adagrad(w, g, o.state, c.LR, c.Eps, c.WeightDecay)
	}
	return o.b.SGD(w, g, c.LR, c.WeightDecay)
}
