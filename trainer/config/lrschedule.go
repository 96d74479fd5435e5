package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The --lr-schedule setting parsed (its rates are schedule.go's lrPlan).

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
