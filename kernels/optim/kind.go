// Package optim is the optimizer maths, written once: the update rules
// (SGD, momentum, Adagrad, Adam, AdamW in PyTorch's definitions, LARS in
// You et al.'s) on host []float32, their
// typed configuration and its validation. The CPU backend's SGD, Momentum and
// Adagrad ops and the parameter server's update rule both call these
// functions, so a step computed on a worker and one computed on a server are
// bit-identical.
//
// With g' = g + wd·w (L2 weight decay folded into the gradient, as PyTorch's
// weight_decay does), in float32 throughout:
//
//	SGD:      w -= lr·g'
//	Momentum: v = mu·v + g';            w -= lr·v   (v starts at 0, so v₁ = g')
//	Adagrad:  h += g'·g';               w -= lr·g'/(√h + eps)
//	LARS:     v = mu·v + lr·trust·g';   w -= v      (per tensor: see LARS)
//
// Nothing here allocates or returns errors in the inner loops: lengths are
// the caller's to check (a mismatch is a programmer error and panics).
package optim

import (
	"fmt"
	"strings"
)

// Kind is an update rule. Its values are stable (the parameter server sends
// them as one byte).
type Kind uint8

const (
	// SGD is plain gradient descent: w -= lr·(g + wd·w).
	SGD Kind = iota
	// Momentum is PyTorch's heavy-ball SGD (no dampening, no Nesterov):
	// v = mu·v + (g + wd·w); w -= lr·v.
	Momentum
	// Adagrad is PyTorch's Adagrad (no lr decay, zero initial accumulator):
	// g' = g + wd·w; h += g'²; w -= lr·g'/(√h + eps).
	Adagrad
	// Adam is PyTorch's torch.optim.Adam (no amsgrad): g' = g + wd·w;
	// m = β1·m + (1−β1)·g'; v = β2·v + (1−β2)·g'·g';
	// w -= (lr/(1−β1^t))·m/(√v/√(1−β2^t) + eps), t the update's count.
	Adam
	// AdamW is PyTorch's torch.optim.AdamW: decoupled weight decay
	// w ← w·(1 − lr·wd) first, then Adam's step with g' = g.
	AdamW
	// LARS is layer-wise adaptive rate scaling, Algorithm 1 of You,
	// Gitman and Ginsburg 2017 ("Large Batch Training of Convolutional
	// Networks"), with PyTorch-style L2 weight decay in the gradient.
	// Each parameter tensor l (every weight matrix and every bias vector
	// on its own: biases and batch-norm parameters are not excluded, they
	// get their own trust ratio) takes, with g' = g + wd·w,
	//
	//	trust = η·‖w‖/(‖g‖ + wd·‖w‖)   (1 if ‖w‖ = 0 or ‖g‖ = 0)
	//	v = mu·v + lr·trust·g';  w -= v
	//
	// η the trust coefficient (Config.TrustCoef), mu the momentum. The
	// norms are float64 sums of squares in a fixed order (SumSquares),
	// the trust ratio and lr·trust float64 (LARSStep.Rate), rounded once
	// to float32; the element-wise step is float32. Which weights form a
	// tensor is the caller's: a rule applied to a slice (Step, a backend's
	// LARS op) takes the whole slice as one tensor.
	LARS
)

// rules is the one list of what each Kind is, besides its maths (rules.go,
// Update) and its device kernel (kernels/cu/elementwise.cu): the name the
// command line and the checkpoints use, the floats of state it keeps per
// weight, whether a step takes its tensor's norms (so that it applies to
// whole tensors only), and the name of its device kernel, whose
// parameters are (w, g, state, n, Update.AppendScalars…) (kernels/cu/ABI.md).
// Adding a rule is a Kind, a row here, its arithmetic in Update and its
// kernel.
var rules = [...]struct {
	name      string
	statePer  int
	perTensor bool
	kernel    string
}{
	SGD:      {"sgd", 0, false, "dml_sgd"},
	Momentum: {"momentum", 1, false, "dml_momentum"},
	Adagrad:  {"adagrad", 1, false, "dml_adagrad"},
	Adam:     {"adam", 2, false, "dml_adam"},
	AdamW:    {"adamw", 2, false, "dml_adam"},
	LARS:     {"lars", 1, true, "dml_lars"},
}

// Kinds lists every Kind, in the order of their values.
var Kinds = func() []Kind {
	ks := make([]Kind, len(rules))
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}()

// wantNames is the kinds' names for a message: "sgd, momentum, … or lars".
func wantNames() string {
	n := make([]string, len(Kinds))
	for i, k := range Kinds {
		n[i] = k.String()
	}
	return strings.Join(n[:len(n)-1], ", ") + " or " + n[len(n)-1]
}

// String returns the name the command line uses ("sgd", "momentum",
// "adagrad", …).
func (k Kind) String() string {
	if k.Valid() {
		return rules[k].name
	}
	return fmt.Sprintf("optim.Kind(%d)", uint8(k))
}

// Valid reports whether k is one of the defined kinds.
func (k Kind) Valid() bool { return int(k) < len(rules) }

// HasState reports whether the rule keeps state beside the weights (the
// momentum buffer, Adagrad's sum of squares, Adam's two moments, LARS's
// velocity); SGD keeps none.
func (k Kind) HasState() bool { return k.StatePer() > 0 }

// StatePer is the floats of state the rule keeps per weight: 0 (SGD), 1
// (Momentum, Adagrad, LARS: its velocity) or 2 (Adam, AdamW: m and v of
// weight i at 2i and 2i+1, interleaved, so that the state of weights
// [lo, hi) is the contiguous [2lo, 2hi)). A rule's state for n weights is
// StatePer()·n floats.
func (k Kind) StatePer() int {
	if k.Valid() {
		return rules[k].statePer
	}
	return 0
}

// PerTensor reports whether a step of the rule reads its tensor's norms
// (LARS's trust ratio): it applies to whole parameter tensors only, each
// one call, and an update of part of a tensor is not the whole update's.
// The other rules are element-wise.
func (k Kind) PerTensor() bool { return k.Valid() && rules[k].perTensor }

// Kernel is the name of the rule's device kernel (kernels/cu/ABI.md), ""
// for an undefined Kind.
func (k Kind) Kernel() string {
	if k.Valid() {
		return rules[k].kernel
	}
	return ""
}

// ParseKind reads "sgd", "momentum", "adagrad", "adam", "adamw" or "lars"
// (any case).
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if strings.EqualFold(s, k.String()) {
			return k, nil
		}
	}
	return 0, &SettingError{Setting: "Kind",
		Msg: fmt.Sprintf("unknown optimizer %q (want %s)", s, wantNames())}
}

// MarshalText returns the name, so that a Config reads as JSON
// {"kind":"momentum",…}.
func (k Kind) MarshalText() ([]byte, error) {
	if !k.Valid() {
		return nil, fmt.Errorf("optim: cannot marshal %v", k)
	}
	return []byte(k.String()), nil
}

// UnmarshalText parses a name as ParseKind does.
func (k *Kind) UnmarshalText(b []byte) error {
	v, err := ParseKind(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}
