package optim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func randSlice(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(scale * r.NormFloat64())
	}
	return x
}

// ref64 is each rule in float64 from the float32 inputs: what the float32
// code approximates.
func ref64(k Kind, w, g, s float64, lr, mu, wd, eps float64) (w1, s1 float64) {
	gp := g + wd*w
	switch k {
	case SGD:
		return w - lr*gp, s
	case Momentum:
		v := mu*s + gp
		return w - lr*v, v
	case Adagrad:
		h := s + gp*gp
		return w - lr*gp/(math.Sqrt(h)+eps), h
	}
	panic(k)
}

func TestStepMatchesFloat64(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, k := range oneStateKinds {
		for _, wd := range []float32{0, 1e-3} {
			cfg := Config{Kind: k, LR: 0.05, Momentum: 0.9, WeightDecay: wd, Eps: 1e-10}
			const n = 1001
			w, g := randSlice(r, n, 1), randSlice(r, n, 0.1)
			state := make([]float32, n)
			if k == Adagrad {
				for i := range state {
					state[i] = float32(r.Float64()) // a sum of squares is >= 0
				}
			} else if k == Momentum {
				state = randSlice(r, n, 0.1)
			}
			w0, s0 := append([]float32(nil), w...), append([]float32(nil), state...)
			for step := range 3 {
				Step(cfg, w, g, state)
				for i := range w {
					ws, ss := float64(w0[i]), float64(s0[i])
					ws, ss = ref64(k, ws, float64(g[i]), ss, float64(cfg.LR), float64(cfg.Momentum), float64(wd), float64(cfg.Eps))
					// One float32 step from float32 inputs: a few ulps of
					// the larger magnitude involved.
					if d := math.Abs(float64(w[i]) - ws); d > 1e-6*(1+math.Abs(ws)) {
						t.Fatalf("%v wd=%v step %d: w[%d] = %v, float64 rule gives %v", k, wd, step, i, w[i], ws)
					}
					if k.HasState() {
						if d := math.Abs(float64(state[i]) - ss); d > 1e-6*(1+math.Abs(ss)) {
							t.Fatalf("%v wd=%v step %d: state[%d] = %v, float64 rule gives %v", k, wd, step, i, state[i], ss)
						}
					}
				}
				copy(w0, w)
				copy(s0, state)
			}
		}
	}
}

// The rules as kernels/cpu/optim.go and ps/update.go wrote them before this
// package: the results must stay identical bit for bit.
func oldCPU(k Kind, wv, gv, sv []float32, lr, mu, eps, wd float32) {
	for i, wi := range wv {
		switch k {
		case SGD:
			wv[i] = wi - lr*(gv[i]+wd*wi)
		case Momentum:
			vi := mu*sv[i] + (gv[i] + wd*wi)
			sv[i] = vi
			wv[i] = wi - lr*vi
		case Adagrad:
			gi := gv[i] + wd*wi
			hi := sv[i] + gi*gi
			sv[i] = hi
			wv[i] = wi - lr*gi/(float32(math.Sqrt(float64(hi)))+eps)
		}
	}
}

func oldPS(k Kind, w, g, s []float32, lr, mu, eps, wd float32) {
	for i := range w {
		w, g := &w[i], g[i]
		switch k {
		case SGD:
			g += wd * *w
			*w -= lr * g
		case Momentum:
			v := &s[i]
			g += wd * *w
			*v = mu**v + g
			*w -= lr * *v
		case Adagrad:
			h := &s[i]
			g += wd * *w
			*h += g * g
			*w -= lr * g / (float32(math.Sqrt(float64(*h))) + eps)
		}
	}
}

func TestBitIdenticalToPreviousCode(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range oneStateKinds {
		for _, wd := range []float32{0, 5e-4, 0.1} {
			cfg := Config{Kind: k, LR: 0.037, Momentum: 0.9, WeightDecay: wd, Eps: 1e-7}
			const n = 4096
			w, g := randSlice(r, n, 1), randSlice(r, n, 0.3)
			s := make([]float32, n)
			wc, sc := append([]float32(nil), w...), append([]float32(nil), s...)
			wp, sp := append([]float32(nil), w...), append([]float32(nil), s...)
			wa, sa := append([]float32(nil), w...), append([]float32(nil), s...)
			for range 5 {
				Step(cfg, w, g, s)
				oldCPU(k, wc, g, sc, cfg.LR, cfg.Momentum, cfg.Eps, wd)
				oldPS(k, wp, g, sp, cfg.LR, cfg.Momentum, cfg.Eps, wd)
				for i := range wa {
					StepAt(cfg, wa, sa, i, g[i])
				}
			}
			for i := range w {
				b := math.Float32bits
				if b(w[i]) != b(wc[i]) || b(s[i]) != b(sc[i]) {
					t.Fatalf("%v wd=%v: Step w[%d]=%v s=%v, old cpu code %v %v", k, wd, i, w[i], s[i], wc[i], sc[i])
				}
				if b(w[i]) != b(wp[i]) || b(s[i]) != b(sp[i]) {
					t.Fatalf("%v wd=%v: Step w[%d]=%v s=%v, old ps code %v %v", k, wd, i, w[i], s[i], wp[i], sp[i])
				}
				if b(w[i]) != b(wa[i]) || b(s[i]) != b(sa[i]) {
					t.Fatalf("%v wd=%v: Step w[%d]=%v s=%v, StepAt %v %v", k, wd, i, w[i], s[i], wa[i], sa[i])
				}
			}
		}
	}
}

func TestKnownValues(t *testing.T) {
	// Hand-computed in exact arithmetic (all values representable).
	w, g := []float32{1, -2}, []float32{0.5, 0.25}
	SGDUpdate(w, g, 0.5, 0.5) // g' = [1, -0.75]
	if w[0] != 0.5 || w[1] != -1.625 {
		t.Errorf("SGD: w = %v, want [0.5 -1.625]", w)
	}
	w, v := []float32{1, -2}, []float32{2, 4}
	MomentumUpdate(w, []float32{0.5, 0.25}, v, 0.5, 0.5, 0) // v = [1.5, 2.25]
	if v[0] != 1.5 || v[1] != 2.25 || w[0] != 0.25 || w[1] != -3.125 {
		t.Errorf("Momentum: w = %v, v = %v; want [0.25 -3.125], [1.5 2.25]", w, v)
	}
	w, h := []float32{1}, []float32{7}
	AdagradUpdate(w, []float32{3}, h, 2, 0, 0) // h = 16, w = 1 - 2·3/4
	if h[0] != 16 || w[0] != -0.5 {
		t.Errorf("Adagrad: w = %v, h = %v; want [-0.5], [16]", w, h)
	}
}

func TestStepPanicsOnMismatch(t *testing.T) {
	for _, c := range []struct {
		name     string
		cfg      Config
		w, g, st []float32
	}{
		{"short g", Config{Kind: SGD}, make([]float32, 3), make([]float32, 2), nil},
		{"long g", Config{Kind: SGD}, make([]float32, 3), make([]float32, 4), nil},
		{"no momentum state", Config{Kind: Momentum}, make([]float32, 3), make([]float32, 3), nil},
		{"short adagrad state", Config{Kind: Adagrad}, make([]float32, 3), make([]float32, 3), make([]float32, 2)},
		{"bad kind", Config{Kind: 7}, make([]float32, 3), make([]float32, 3), make([]float32, 3)},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", c.name)
				}
			}()
			Step(c.cfg, c.w, c.g, c.st)
		}()
	}
	Step(Config{Kind: SGD, LR: 1}, nil, nil, nil) // empty is fine
}

func TestParseKind(t *testing.T) {
	for _, k := range Kinds {
		got, err := ParseKind(k.String())
		if err != nil || got != k {
			t.Errorf("ParseKind(%q) = %v, %v", k.String(), got, err)
		}
		if got, err := ParseKind(strings.ToUpper(k.String())); err != nil || got != k {
			t.Errorf("ParseKind(%q) = %v, %v", strings.ToUpper(k.String()), got, err)
		}
	}
	_, err := ParseKind("lamb")
	var se *SettingError
	if !errors.As(err, &se) || se.Setting != "Kind" || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `"lamb"`) {
		t.Errorf("ParseKind(lamb) error = %v", err)
	}
	if s := Kind(9).String(); s != "optim.Kind(9)" {
		t.Errorf("Kind(9).String() = %q", s)
	}
	if SGD.HasState() || !Momentum.HasState() || !Adagrad.HasState() || !Adam.HasState() || AdamW.StatePer() != 2 || Momentum.StatePer() != 1 {
		t.Error("HasState or StatePer wrong")
	}
	for _, k := range Kinds {
		if k.PerTensor() != (k == LARS) || k.Kernel() == "" {
			t.Errorf("%v: PerTensor %v, Kernel %q", k, k.PerTensor(), k.Kernel())
		}
	}
	if k := Kind(len(Kinds)); k.Valid() || k.PerTensor() || k.StatePer() != 0 || k.Kernel() != "" {
		t.Errorf("%v: an undefined kind has a rule", k)
	}
	for _, k := range Kinds {
		if !strings.Contains(err.Error(), k.String()) {
			t.Errorf("ParseKind(lamb) error = %v: does not name %v", err, k)
		}
	}
}

// TestUpdateApplyIsRule: a backend's one optimizer op computes
// Update.Apply, which must be each rule's own function bit for bit.
func TestUpdateApplyIsRule(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const n = 41
	for _, k := range Kinds {
		cfg := Config{Kind: k, LR: 0.05, Momentum: 0.9, WeightDecay: 0.01, Eps: 1e-3, Beta1: 0.9, Beta2: 0.99, TrustCoef: 0.01, Step: 3}
		w, g, st := make([]float32, n), make([]float32, n), make([]float32, k.StatePer()*n)
		for i := range w {
			w[i], g[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		for i := range st {
			st[i] = float32(r.Float64())
		}
		w2, st2 := slices.Clone(w), slices.Clone(st)
		u := NewUpdate(cfg)
		u.Apply(w, g, st)
		switch k {
		case SGD:
			SGDUpdate(w2, g, cfg.LR, cfg.WeightDecay)
		case Momentum:
			MomentumUpdate(w2, g, st2, cfg.LR, cfg.Momentum, cfg.WeightDecay)
		case Adagrad:
			AdagradUpdate(w2, g, st2, cfg.LR, cfg.Eps, cfg.WeightDecay)
		case Adam, AdamW:
			AdamUpdate(w2, g, st2, NewAdamStep(cfg))
		case LARS:
			LARSUpdate(w2, g, st2, NewLARSStep(cfg))
		}
		if !slices.Equal(w, w2) || !slices.Equal(st, st2) {
			t.Errorf("%v: Update.Apply differs from the rule's function", k)
		}
	}
}

func TestConfigJSON(t *testing.T) {
	in := Config{Kind: Adagrad, LR: 0.5, Eps: 1e-10}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"kind":"adagrad"`) {
		t.Errorf("JSON = %s", b)
	}
	var out Config
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Errorf("round trip = %+v, %v; want %+v", out, err, in)
	}
	if err := json.Unmarshal([]byte(`{"kind":"lamb"}`), &out); err == nil {
		t.Error("unknown kind unmarshalled")
	}
}

func TestValidate(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	ok := Config{Kind: Momentum, LR: 0.05, Momentum: 0.9, Eps: 1e-10}
	for _, c := range []struct {
		name    string
		mod     func(*Config)
		setting string // "" means valid
		msg     string
	}{
		{"defaults", func(*Config) {}, "", ""},
		{"sgd without eps", func(c *Config) { c.Kind, c.Eps = SGD, 0 }, "", ""},
		{"momentum 0", func(c *Config) { c.Momentum = 0 }, "", ""},
		{"unknown kind", func(c *Config) { c.Kind = 9 }, "Kind", "unknown optimizer"},
		{"lr 0", func(c *Config) { c.LR = 0 }, "LR", "learning rate 0 must be greater than 0"},
		{"lr negative", func(c *Config) { c.LR = -1 }, "LR", "learning rate -1"},
		{"lr NaN", func(c *Config) { c.LR = nan }, "LR", "learning rate NaN"},
		{"momentum 1", func(c *Config) { c.Momentum = 1 }, "Momentum", "momentum 1 must be in [0, 1)"},
		{"momentum negative", func(c *Config) { c.Momentum = -0.1 }, "Momentum", "momentum -0.1"},
		{"momentum NaN", func(c *Config) { c.Momentum = nan }, "Momentum", "momentum NaN"},
		{"weight decay negative", func(c *Config) { c.WeightDecay = -1e-4 }, "WeightDecay", "weight decay -0.0001 must not be negative"},
		{"adagrad eps 0", func(c *Config) { c.Kind, c.Eps = Adagrad, 0 }, "Eps", "adagrad eps 0 must be greater than 0"},
		{"lars", func(c *Config) { c.Kind, c.TrustCoef = LARS, 0.001 }, "", ""},
		{"lars trust 0", func(c *Config) { c.Kind, c.TrustCoef = LARS, 0 }, "TrustCoef", "lars trust coefficient 0 must be finite and greater than 0"},
		{"lars trust negative", func(c *Config) { c.Kind, c.TrustCoef = LARS, -1 }, "TrustCoef", "lars trust coefficient -1"},
		{"lars trust Inf", func(c *Config) { c.Kind, c.TrustCoef = LARS, inf }, "TrustCoef", "lars trust coefficient +Inf"},
		{"momentum ignores trust", func(c *Config) { c.TrustCoef = 0 }, "", ""},
		{"momentum eps 0", func(c *Config) { c.Eps = 0 }, "", ""},
		// No setting may be NaN or ±Inf, read by the rule or not (issue 10:
		// --lr Inf panicked in the configuration hash).
		{"lr +Inf", func(c *Config) { c.LR = inf }, "LR", "learning rate +Inf must be finite"},
		{"momentum +Inf", func(c *Config) { c.Momentum = inf }, "Momentum", "momentum +Inf"},
		{"momentum -Inf", func(c *Config) { c.Momentum = -inf }, "Momentum", "momentum -Inf"},
		{"weight decay NaN", func(c *Config) { c.WeightDecay = nan }, "WeightDecay", "weight decay NaN"},
		{"weight decay +Inf", func(c *Config) { c.WeightDecay = inf }, "WeightDecay", "weight decay +Inf must be finite"},
		{"sgd eps NaN", func(c *Config) { c.Kind, c.Eps = SGD, nan }, "Eps", "eps NaN"},
		{"momentum eps +Inf", func(c *Config) { c.Eps = inf }, "Eps", "eps +Inf"},
		{"adagrad eps +Inf", func(c *Config) { c.Kind, c.Eps = Adagrad, inf }, "Eps", "eps +Inf"},
		{"eps negative", func(c *Config) { c.Eps = -1 }, "Eps", "eps -1"},
		{"adam", func(c *Config) { c.Kind, c.Beta1, c.Beta2, c.Eps = Adam, 0.9, 0.999, 1e-8 }, "", ""},
		{"adam beta1 1", func(c *Config) { c.Kind, c.Beta1, c.Beta2, c.Eps = Adam, 1, 0.999, 1e-8 }, "Beta1", "beta1 1 must be in [0, 1)"},
		{"adamw beta2 NaN", func(c *Config) { c.Kind, c.Beta1, c.Beta2, c.Eps = AdamW, 0.9, nan, 1e-8 }, "Beta2", "beta2 NaN"},
		{"adam eps 0", func(c *Config) { c.Kind, c.Beta1, c.Beta2, c.Eps = Adam, 0.9, 0.999, 0 }, "Eps", "adam eps 0 must be greater than 0"},
	} {
		cfg := ok
		c.mod(&cfg)
		err := cfg.Validate()
		if c.setting == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var se *SettingError
		if !errors.As(err, &se) || se.Setting != c.setting || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %v, want a SettingError for %s saying %q", c.name, err, c.setting, c.msg)
		}
	}
}

func BenchmarkStep(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	const n = 1 << 16
	w, g, s := randSlice(r, n, 1), randSlice(r, n, 0.1), make([]float32, 2*n)
	defer func(v bool) { vectorRules = v }(vectorRules)
	for _, vec := range []bool{vectorRules, false} {
		for _, k := range Kinds {
			cfg := Config{Kind: k, LR: 1e-3, Momentum: 0.9, Eps: 1e-10, Beta1: 0.9, Beta2: 0.999, Step: 10}
			s := s[:k.StatePer()*n]
			b.Run(fmt.Sprintf("kind=%v/vector=%v", k, vec), func(b *testing.B) {
				vectorRules = vec
				b.SetBytes(4 * 4 * n)
				for b.Loop() {
					Step(cfg, w, g, s)
				}
			})
		}
	}
}

// TestStepKeysIsStepAt: a sparse push through StepKeys leaves every weight
// and state bit for bit as StepAt key by key does, with repeated keys, an
// offset range, and with and without the first (warming) pass. (Not
// LARS, whose trust ratio takes every key's gradient: TestLARSKeys.)
func TestStepKeysIsStepAt(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const n, off, nk = 3000, 700, 900
	for _, k := range Kinds {
		if k == LARS {
			continue
		}
		for _, scratch := range [][]float32{nil, make([]float32, nk)} {
			cfg := Config{Kind: k, LR: 0.037, Momentum: 0.9, WeightDecay: 5e-4, Eps: 1e-7, Beta1: 0.9, Beta2: 0.999, Step: 3}
			w := randSlice(r, n, 1)
			s := make([]float32, max(1, k.StatePer())*n)
			wa, sa := append([]float32(nil), w...), append([]float32(nil), s...)
			for range 4 {
				keys := make([]int64, nk)
				for i := range keys {
					keys[i] = int64(off + r.IntN(n/4)) // many repeats
				}
				g := randSlice(r, nk, 0.3)
				StepKeys(cfg, w, s, keys, off, g, scratch)
				for i, key := range keys {
					StepAt(cfg, wa, sa, int(key)-off, g[i])
				}
			}
			for i := range w {
				b := math.Float32bits
				if b(w[i]) != b(wa[i]) || b(s[i]) != b(sa[i]) {
					t.Fatalf("%v scratch=%v: StepKeys w[%d]=%v s=%v, StepAt %v %v", k, scratch != nil, i, w[i], s[i], wa[i], sa[i])
				}
			}
		}
	}
}

// TestVectorRulesAreScalar: the AVX2 rules (where the CPU has them) give
// every weight and state bit for bit what the scalar rules give, at every
// length around the 8- and 16-float blocks, with zeros of both signs,
// subnormals, infinities, NaNs and huge values among the inputs.
func TestVectorRulesAreScalar(t *testing.T) {
	if !vectorRules {
		t.Skip("no AVX2 on this CPU: only the scalar rules run")
	}
	defer func(v bool) { vectorRules = v }(vectorRules)
	r := rand.New(rand.NewPCG(9, 10))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-40, float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), 3e38, -3e38, 1}
	pick := func(scale float32) float32 {
		if r.IntN(8) == 0 {
			return special[r.IntN(len(special))]
		}
		return (r.Float32()*2 - 1) * scale
	}
	// Learning rate, momentum and weight decay, zero and odd ones included
	// (they were kernels/cpu's tests of its own copy of these loops).
	hyper := [][3]float32{{0.05, 0.9, 0}, {0.1, 0, 1e-4}, {1e-3, 0.99, 5e-4}, {0.5, 0.5, 0.5}, {3.7, 0.123, 1e-30}}
	lengths := []int{1031}
	for n := range 71 {
		lengths = append(lengths, n)
	}
	for _, k := range oneStateKinds {
		for _, n := range lengths {
			for j, h := range hyper {
				cfg := Config{Kind: k, LR: h[0], Momentum: h[1], WeightDecay: h[2], Eps: 1e-7}
				wd := h[2]
				off := j % 4 // unaligned starts too
				w, g, s := make([]float32, n+off)[off:], make([]float32, n+off)[off:], make([]float32, n+off)[off:]
				for i := range w {
					w[i], g[i], s[i] = pick(1), pick(0.3), pick(0.1)
				}
				wv, sv := slices.Clone(w), slices.Clone(s)
				vectorRules = true
				Step(cfg, wv, g, sv)
				vectorRules = false
				Step(cfg, w, g, s)
				// Bit for bit, except that a NaN may carry the other operand's
				// payload (x86 keeps the first source's; which operand is
				// first differs between the scalar and vector encodings). A
				// NaN stops training wherever it appears.
				same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
				for i := range w {
					if !same(w[i], wv[i]) || !same(s[i], sv[i]) {
						t.Fatalf("%v n=%d wd=%v: [%d] vector w=%v s=%v, scalar %v %v (g %v)", k, n, wd, i, wv[i], sv[i], w[i], s[i], g[i])
					}
				}
			}
		}
	}
}

// oneStateKinds are the rules with at most one float of state per weight
// (the tests written for them).
var oneStateKinds = []Kind{SGD, Momentum, Adagrad}

// adam64 is Adam (decoupled: AdamW) in float64 from the float32 inputs.
func adam64(decoupled bool, w, g, m, v, lr, b1, b2, eps, wd float64, t int) (w1, m1, v1 float64) {
	if decoupled {
		w *= 1 - lr*wd
	} else {
		g += wd * w
	}
	m = b1*m + (1-b1)*g
	v = b2*v + (1-b2)*g*g
	mh := m / (1 - math.Pow(b1, float64(t)))
	vh := v / (1 - math.Pow(b2, float64(t)))
	return w - lr*mh/(math.Sqrt(vh)+eps), m, v
}

// TestAdamMatchesFloat64: five steps of Adam and AdamW, with and without
// weight decay, track the float64 rule step by step (bias correction by
// the step's count) within a few ulps.
func TestAdamMatchesFloat64(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, k := range []Kind{Adam, AdamW} {
		for _, wd := range []float32{0, 1e-2} {
			cfg := Config{Kind: k, LR: 1e-3, WeightDecay: wd, Eps: 1e-8, Beta1: 0.9, Beta2: 0.999}
			const n = 777
			w := randSlice(r, n, 1)
			s := make([]float32, 2*n)
			for step := 1; step <= 5; step++ {
				g := randSlice(r, n, 0.1)
				w0, s0 := slices.Clone(w), slices.Clone(s)
				cfg.Step = step
				Step(cfg, w, g, s)
				for i := range w {
					ws, ms, vs := adam64(k == AdamW, float64(w0[i]), float64(g[i]), float64(s0[2*i]), float64(s0[2*i+1]),
						float64(cfg.LR), 0.9, 0.999, 1e-8, float64(wd), step)
					if math.Abs(float64(w[i])-ws) > 1e-6*(1+math.Abs(ws)) || math.Abs(float64(s[2*i])-ms) > 1e-6*(1+math.Abs(ms)) ||
						math.Abs(float64(s[2*i+1])-vs) > 1e-6*(1e-3+math.Abs(vs)) {
						t.Fatalf("%v wd=%v step %d: w,m,v[%d] = %v %v %v, float64 rule %v %v %v", k, wd, step, i, w[i], s[2*i], s[2*i+1], ws, ms, vs)
					}
				}
			}
		}
	}
}

// TestAdamTorchValues: Adam and AdamW on fixed weights and gradients, two
// steps, against the values torch.optim (1.13, CPU) printed for the same
// inputs (bench/optim/torch_check.py prints them again where torch is).
func TestAdamTorchValues(t *testing.T) {
	for _, tc := range []struct {
		k    Kind
		want []float32
	}{
		{Adam, adamTorchWant},
		{AdamW, adamWTorchWant},
	} {
		w := []float32{0.5, -1.25, 2, 0}
		s := make([]float32, 2*len(w))
		cfg := Config{Kind: tc.k, LR: 0.01, WeightDecay: 0.1, Eps: 1e-8, Beta1: 0.9, Beta2: 0.999}
		for step, g := range [][]float32{{0.1, -0.2, 0.3, 0.05}, {-0.3, 0.1, 0.2, 0.4}} {
			cfg.Step = step + 1
			Step(cfg, w, g, s)
		}
		for i := range w {
			if d := math.Abs(float64(w[i] - tc.want[i])); d > 2e-7*(1+math.Abs(float64(tc.want[i]))) {
				t.Errorf("%v: w[%d] = %.9g, torch %.9g", tc.k, i, w[i], tc.want[i])
			}
		}
	}
}

// What bench/optim/torch_check.py printed with Debian's python3-torch
// (1.13, CPU): two steps of torch.optim.Adam and AdamW (lr 0.01, betas
// 0.9 and 0.999, eps 1e-8, weight decay 0.1).
var adamTorchWant = []float32{0.49295246601104736, -1.2327693700790405, 1.9801207780838013, -0.018216419965028763}
var adamWTorchWant = []float32{0.4939524233341217, -1.234847903251648, 1.9763085842132568, -0.01820465549826622}

// TestAdamVectorIsScalar: Adam's and AdamW's AVX2 rule (where the CPU has
// it) gives every weight and moment bit for bit what adamAt gives, at
// every length around the 8-float blocks, unaligned, with zeros of both
// signs, subnormals, infinities and NaNs among the inputs (a NaN may be
// another NaN).
func TestAdamVectorIsScalar(t *testing.T) {
	if !vectorRules {
		t.Skip("no AVX2 on this CPU: only the scalar rule runs")
	}
	defer func(v bool) { vectorRules = v }(vectorRules)
	r := rand.New(rand.NewPCG(13, 14))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-40, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 3e38}
	pick := func(scale float32) float32 {
		if r.IntN(10) == 0 {
			return special[r.IntN(len(special))]
		}
		return (r.Float32()*2 - 1) * scale
	}
	lengths := []int{1031}
	for n := range 41 {
		lengths = append(lengths, n)
	}
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
	for _, k := range []Kind{Adam, AdamW} {
		for _, n := range lengths {
			cfg := Config{Kind: k, LR: 0.003, WeightDecay: 0.02, Eps: 1e-8, Beta1: 0.9, Beta2: 0.999, Step: 1 + n%7}
			off := n % 3
			w, g, s := make([]float32, n+off)[off:], make([]float32, n+off)[off:], make([]float32, 2*n+off)[off:]
			for i := range w {
				w[i], g[i] = pick(1), pick(0.3)
				s[2*i], s[2*i+1] = pick(0.1), float32(math.Abs(float64(pick(0.01))))
			}
			wv, sv := slices.Clone(w), slices.Clone(s)
			vectorRules = true
			Step(cfg, wv, g, sv)
			vectorRules = false
			Step(cfg, w, g, s)
			for i := range w {
				if !same(wv[i], w[i]) || !same(sv[2*i], s[2*i]) || !same(sv[2*i+1], s[2*i+1]) {
					t.Fatalf("%v n=%d [%d]: vector w,m,v %v %v %v, scalar %v %v %v", k, n, i, wv[i], sv[2*i], sv[2*i+1], w[i], s[2*i], s[2*i+1])
				}
			}
		}
	}
}

// TestLARSTorchValues: LARS on a weight of 4 and a bias of 3 (starting at
// 0: trust 1 at the first step), two steps, against the weights and
// velocities that LARS written in torch tensor ops (1.13, CPU) printed for
// the same inputs (bench/optim/torch_check.py).
func TestLARSTorchValues(t *testing.T) {
	cfg := Config{Kind: LARS, LR: 0.5, Momentum: 0.9, WeightDecay: 0.01, TrustCoef: 0.02}
	w := []float32{0.5, -1.25, 2, 0, 0, 0, 0}
	v := make([]float32, len(w))
	for _, g := range [][]float32{{0.1, -0.2, 0.3, 0.05, 0.2, -0.1, 0}, {-0.3, 0.1, 0.2, 0.4, 0.05, 0.3, -0.2}} {
		Step(cfg, w[:4], g[:4], v[:4]) // each tensor on its own
		Step(cfg, w[4:], g[4:], v[4:])
	}
	for i := range w {
		if d := math.Abs(float64(w[i] - larsTorchWant[i])); d > 2e-7*(1+math.Abs(float64(larsTorchWant[i]))) {
			t.Errorf("w[%d] = %.9g, torch %.9g", i, w[i], larsTorchWant[i])
		}
		// The velocity is lr·trust·g' itself: a wrong trust ratio shows
		// here even where the weights hardly move.
		if d := math.Abs(float64(v[i] - larsTorchVelocity[i])); d > 1e-6*math.Abs(float64(larsTorchVelocity[i])) {
			t.Errorf("v[%d] = %.9g, torch %.9g", i, v[i], larsTorchVelocity[i])
		}
	}
}

// What bench/optim/torch_check.py printed with Debian's python3-torch
// (1.13, CPU) for two steps of LARS (lr 0.5, momentum 0.9, weight decay
// 0.01, trust coefficient 0.02): the weights, then the velocities.
var larsTorchWant = []float32{0.500345766544342, -1.2294212579727173, 1.9543206691741943, -0.022406430914998055, -0.19015003740787506, 0.09407985210418701, 0.0006124140927568078}
var larsTorchVelocity = []float32{-0.006649191491305828, -0.007821769453585148, 0.026468880474567413, 0.019404802471399307, 0.09015003591775894, -0.044079847633838654, -0.0006124140927568078}

// TestLARSMatchesFloat64: three steps of LARS on a tensor longer than
// NormChunk, with and without weight decay, and with weights of zero
// (trust 1), track the float64 rule within a few ulps.
func TestLARSMatchesFloat64(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, wd := range []float32{0, 1e-2} {
		for _, zero := range []bool{false, true} {
			cfg := Config{Kind: LARS, LR: 0.1, Momentum: 0.9, WeightDecay: wd, TrustCoef: 0.001}
			const n = 2500
			w := randSlice(r, n, 1)
			if zero {
				clear(w)
			}
			v := make([]float32, n)
			for step := range 3 {
				g := randSlice(r, n, 0.1)
				w0, v0 := slices.Clone(w), slices.Clone(v)
				Step(cfg, w, g, v)
				var sw, sg float64
				for i := range w0 {
					sw += float64(w0[i]) * float64(w0[i])
					sg += float64(g[i]) * float64(g[i])
				}
				trust := 1.0
				if sw > 0 {
					trust = 0.001 * math.Sqrt(sw) / (math.Sqrt(sg) + float64(wd)*math.Sqrt(sw))
				}
				if zero && step == 0 && trust != 1 {
					t.Fatal("zero weights: want trust 1")
				}
				for i := range w {
					gp := float64(g[i]) + float64(wd)*float64(w0[i])
					vs := 0.9*float64(v0[i]) + 0.1*trust*gp
					ws := float64(w0[i]) - vs
					// The velocity's error is relative to its terms' sizes
					// (they may cancel, as may g and wd·w).
					if math.Abs(float64(v[i])-vs) > 1e-6*(1e-12+math.Abs(0.9*float64(v0[i]))+0.1*trust*(math.Abs(float64(g[i]))+float64(wd)*math.Abs(float64(w0[i])))) || math.Abs(float64(w[i])-ws) > 1e-6*(1+math.Abs(ws)) {
						t.Fatalf("wd=%v zero=%v step %d: w,v[%d] = %v %v, float64 rule %v %v", wd, zero, step, i, w[i], v[i], ws, vs)
					}
				}
			}
		}
	}
}

// TestSumSquaresOrder: SumSquares is the blocked order its comment
// states (block sums of NormChunk floats, then their sum), not a plain
// running sum: on values where the orders round differently the bits are
// the blocked order's.
func TestSumSquaresOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	x := randSlice(r, 3*NormChunk+17, 1)
	x[0] = 1e10 // a large first value: a running sum loses low bits the blocks keep
	var want, plain float64
	for lo := 0; lo < len(x); lo += NormChunk {
		var c float64
		for _, v := range x[lo:min(lo+NormChunk, len(x))] {
			c += float64(v) * float64(v)
		}
		want += c
	}
	for _, v := range x {
		plain += float64(v) * float64(v)
	}
	if got := SumSquares(x); got != want {
		t.Fatalf("SumSquares = %v, blocked order %v", got, want)
	}
	if plain == want {
		t.Log("the running sum happens to agree here")
	}
}

// TestLARSVectorIsScalar: LARS's AVX2 step (where the CPU has it) gives
// every weight and velocity bit for bit what larsAt gives, at every length
// around the 8-float blocks, unaligned, with zeros of both signs,
// subnormals, infinities and NaNs among the inputs.
func TestLARSVectorIsScalar(t *testing.T) {
	if !vectorRules {
		t.Skip("no AVX2 on this CPU: only the scalar rule runs")
	}
	defer func(v bool) { vectorRules = v }(vectorRules)
	r := rand.New(rand.NewPCG(25, 26))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-40, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 3e38}
	pick := func(scale float32) float32 {
		if r.IntN(10) == 0 {
			return special[r.IntN(len(special))]
		}
		return (r.Float32()*2 - 1) * scale
	}
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
	lengths := []int{1031}
	for n := range 41 {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		off := n % 3
		w, g, v := make([]float32, n+off)[off:], make([]float32, n+off)[off:], make([]float32, n+off)[off:]
		for i := range w {
			w[i], g[i], v[i] = pick(1), pick(0.3), pick(0.1)
		}
		wv, vv := slices.Clone(w), slices.Clone(v)
		rate := 0.003 + float32(n)*1e-4
		vectorRules = true
		LARSApply(wv, g, vv, rate, 0.9, 0.02)
		vectorRules = false
		LARSApply(w, g, v, rate, 0.9, 0.02)
		for i := range w {
			if !same(wv[i], w[i]) || !same(vv[i], v[i]) {
				t.Fatalf("n=%d [%d]: vector w,v %v %v, scalar %v %v", n, i, wv[i], vv[i], w[i], v[i])
			}
		}
	}
}

// TestLARSKeys: a sparse push through LARSKeys takes each tensor's trust
// ratio from the whole tensor's weights and the pushed gradients (the
// others 0): with every key of the range pushed once in order, it is
// LARSUpdate tensor by tensor bit for bit (tensors under NormChunk long,
// where the key order is SumSquares's); with some keys, it is LARSUpdate
// of the tensor with the gradient zero elsewhere, on the pushed keys; a
// key outside every pushed tensor is left alone. StepKeys and StepAt
// take w as one tensor.
func TestLARSKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	s := NewLARSStep(Config{Kind: LARS, LR: 0.3, Momentum: 0.9, WeightDecay: 1e-3, TrustCoef: 0.01})
	starts := []int{0, 300, 310, 900}
	const n, off = 1000, 5000
	w, v := randSlice(r, n, 1), randSlice(r, n, 0.01)
	g := randSlice(r, n, 0.1)
	keys := make([]int64, n)
	for i := range keys {
		keys[i] = int64(off + i)
	}
	wa, va := slices.Clone(w), slices.Clone(v)
	LARSKeys(s, w, v, starts, keys, off, g)
	bounds := append(slices.Clone(starts), n)
	for k := range starts {
		lo, hi := bounds[k], bounds[k+1]
		LARSUpdate(wa[lo:hi], g[lo:hi], va[lo:hi], s)
	}
	b := math.Float32bits
	for i := range w {
		if b(w[i]) != b(wa[i]) || b(v[i]) != b(va[i]) {
			t.Fatalf("all keys: w,v[%d] = %v %v, LARSUpdate by tensor %v %v", i, w[i], v[i], wa[i], va[i])
		}
	}
	// Keys 320, 10 and 500 (tensors 2, 0 and 2): tensor 1 and 3 untouched.
	pk := []int64{off + 320, off + 10, off + 500}
	pg := []float32{0.5, -0.25, 0.125}
	w0, v0 := slices.Clone(w), slices.Clone(v)
	LARSKeys(s, w, v, starts, pk, off, pg)
	for _, tc := range []struct{ lo, hi int }{{0, 300}, {310, 900}} {
		gz := make([]float32, n)
		for i, k := range pk {
			gz[int(k)-off] = pg[i]
		}
		wt, vt := slices.Clone(w0[tc.lo:tc.hi]), slices.Clone(v0[tc.lo:tc.hi])
		LARSUpdate(wt, gz[tc.lo:tc.hi], vt, s)
		for _, k := range pk {
			j := int(k) - off
			if j >= tc.lo && j < tc.hi && (b(w[j]) != b(wt[j-tc.lo]) || b(v[j]) != b(vt[j-tc.lo])) {
				t.Fatalf("key %d: w,v %v %v, want %v %v", j, w[j], v[j], wt[j-tc.lo], vt[j-tc.lo])
			}
		}
	}
	for i := range w {
		if i != 320 && i != 10 && i != 500 && (b(w[i]) != b(w0[i]) || b(v[i]) != b(v0[i])) {
			t.Fatalf("key %d not pushed but changed", i)
		}
	}
	// StepAt is StepKeys with the one key: w one tensor.
	cfg := Config{Kind: LARS, LR: 0.3, Momentum: 0.9, WeightDecay: 1e-3, TrustCoef: 0.01}
	wb, vb := slices.Clone(w), slices.Clone(v)
	StepAt(cfg, w, v, 7, 0.5)
	StepKeys(cfg, wb, vb, []int64{7}, 0, []float32{0.5}, nil)
	if b(w[7]) != b(wb[7]) || b(v[7]) != b(vb[7]) {
		t.Fatalf("StepAt %v %v, StepKeys %v %v", w[7], v[7], wb[7], vb[7])
	}
}
