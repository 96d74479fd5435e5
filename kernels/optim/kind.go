// Package optim is the optimizer maths, written once: the update rules
// (SGD, momentum, Adagrad in PyTorch's definitions) on host []float32, their
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
)

// Kinds lists every Kind, in the order of their values.
var Kinds = []Kind{SGD, Momentum, Adagrad}

var kindNames = [...]string{SGD: "sgd", Momentum: "momentum", Adagrad: "adagrad"}

// String returns the name the command line uses ("sgd", "momentum",
// "adagrad").
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("optim.Kind(%d)", uint8(k))
}

// Valid reports whether k is one of the defined kinds.
func (k Kind) Valid() bool { return int(k) < len(kindNames) }

// HasState reports whether the rule keeps one float32 of state per weight
// (the momentum buffer, Adagrad's sum of squares); SGD keeps none.
func (k Kind) HasState() bool { return k == Momentum || k == Adagrad }

// ParseKind reads "sgd", "momentum" or "adagrad" (any case).
func ParseKind(s string) (Kind, error) {
	for i, n := range kindNames {
		if strings.EqualFold(s, n) {
			return Kind(i), nil
		}
	}
	return 0, &SettingError{Setting: "Kind",
		Msg: fmt.Sprintf("unknown optimizer %q (want sgd, momentum or adagrad)", s)}
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
