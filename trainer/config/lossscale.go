package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Config.LossScale's values (trainer/allreduce/lossscale.go scales by
// them).

const (
	// LossScaleInit is dynamic scaling's first S (GradScaler's init_scale).
	LossScaleInit = 1 << 16
	// MinLossScale: an overflow at S = 1 is not a scaling problem — the
	// forward pass or the gradient itself is beyond half precision.
	MinLossScale = 1
	// MaxLossScale keeps S finite in float32 with room for the loss's
	// gradient.
	MaxLossScale = 1 << 24
)

// LossScale is a parsed Config.LossScale: the first S, and whether it
// changes (dynamic) or stays. Scale 0: no scaling.
type LossScale struct {
	Scale   float32
	Dynamic bool
}

// ParseLossScale reads Config.LossScale: "" or "off" (none), "dynamic"
// (from LossScaleInit) or "dynamic:S0" (from S0, a power of two), or a
// static S (a number from 1 to MaxLossScale).
func ParseLossScale(s string) (LossScale, error) {
	switch s {
	case "", "off":
		return LossScale{}, nil
	case "dynamic":
		return LossScale{Scale: LossScaleInit, Dynamic: true}, nil
	}
	spec, dynamic := strings.CutPrefix(s, "dynamic:")
	v, err := strconv.ParseFloat(spec, 32)
	if err != nil || !(v >= MinLossScale && v <= MaxLossScale) {
		return LossScale{}, fmt.Errorf("%q: want dynamic, dynamic:S0, off, or a static scale, S0 and S from %d to %d", s, MinLossScale, MaxLossScale)
	}
	if m, _ := math.Frexp(v); dynamic && m != 0.5 {
		return LossScale{}, fmt.Errorf("%q: a dynamic scale starts at a power of two (so that dividing by it is exact)", s)
	}
	return LossScale{Scale: float32(v), Dynamic: dynamic}, nil
}
