package half

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func isNaN32(f float32) bool { return f != f }

func TestFloat16RoundTripAll(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := Float16ToFloat32(uint16(h))
		back := Float32ToFloat16(f)
		if isNaN32(f) {
			if back&0x7c00 != 0x7c00 || back&0x3ff == 0 || back&0x8000 != uint16(h)&0x8000 {
				t.Fatalf("NaN %#04x -> %v -> %#04x: not a NaN of the same sign", h, f, back)
			}
			continue
		}
		if back != uint16(h) {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, back)
		}
	}
}

func TestBFloat16RoundTripAll(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := BFloat16ToFloat32(uint16(h))
		back := Float32ToBFloat16(f)
		if isNaN32(f) {
			if !isNaN32(BFloat16ToFloat32(back)) || back&0x8000 != uint16(h)&0x8000 {
				t.Fatalf("NaN %#04x -> %#04x: not a NaN of the same sign", h, back)
			}
			continue
		}
		if back != uint16(h) {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, back)
		}
	}
}

func TestFloat16Edges(t *testing.T) {
	sub := math.Ldexp(1, -24) // smallest float16 subnormal
	for _, tc := range []struct {
		in   float64
		want uint16
	}{
		{0, 0x0000},
		{math.Copysign(0, -1), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{65504, 0x7bff},                    // max
		{65519.99, 0x7bff},                 // just below the halfway point to 65536
		{65520, 0x7c00},                    // halfway, ties to even: Inf
		{1e6, 0x7c00},                      // overflow
		{-1e6, 0xfc00},                     // negative overflow
		{math.Inf(1), 0x7c00},              //
		{math.Inf(-1), 0xfc00},             //
		{sub, 0x0001},                      // smallest subnormal
		{sub / 2, 0x0000},                  // halfway to zero: ties to even, 0
		{sub / 2 * 1.0001, 0x0001},         // above halfway
		{sub * 1.5, 0x0002},                // halfway between 1 and 2 ulps: even, 2
		{sub * 2.5, 0x0002},                // halfway between 2 and 3: even, 2
		{math.Ldexp(1, -14), 0x0400},       // smallest normal
		{math.Ldexp(1023.5, -24), 0x0400},  // rounds up from the largest subnormal into the normals
		{1 + math.Ldexp(1, -11), 0x3c00},   // 1 + half ulp: ties to even, 1
		{1 + 3*math.Ldexp(1, -11), 0x3c02}, // 1 + 1.5 ulp: ties to even, 1+2ulp
		{math.Ldexp(1, -30), 0x0000},       // far below
		{math.SmallestNonzeroFloat32, 0x0000},
	} {
		if got := Float32ToFloat16(float32(tc.in)); got != tc.want {
			t.Errorf("Float32ToFloat16(%g) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
	if got := Float16ToFloat32(0x0001); float64(got) != sub {
		t.Errorf("Float16ToFloat32(1) = %g, want 2^-24", got)
	}
	if got := Float16ToFloat32(0x7bff); got != Float16Max {
		t.Errorf("Float16ToFloat32(0x7bff) = %g, want 65504", got)
	}
	if !isNaN32(Float16ToFloat32(Float32ToFloat16(float32(math.NaN())))) {
		t.Errorf("NaN did not survive")
	}
}

func TestBFloat16Edges(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3f80},
		{math.MaxFloat32, 0x7f80},                  // rounds to Inf (above bf16 max + half ulp)
		{math.Float32frombits(0x7f7f0000), 0x7f7f}, // bf16 max
		{math.Float32frombits(0x3f808000), 0x3f80}, // halfway, even stays
		{math.Float32frombits(0x3f818000), 0x3f82}, // halfway, odd rounds up
		{math.Float32frombits(0x3f808001), 0x3f81}, // above halfway
		{math.Float32frombits(0x00000001), 0x0000}, // smallest float32 subnormal
		{math.Float32frombits(0x00018000), 0x0002}, // subnormal halfway, odd rounds up
		{float32(math.Inf(-1)), 0xff80},
	} {
		if got := Float32ToBFloat16(tc.in); got != tc.want {
			t.Errorf("Float32ToBFloat16(%g = %#08x) = %#04x, want %#04x", tc.in, math.Float32bits(tc.in), got, tc.want)
		}
	}
	if nan := Float32ToBFloat16(math.Float32frombits(0x7f800001)); !isNaN32(BFloat16ToFloat32(nan)) {
		t.Errorf("signalling NaN with a low payload became %#04x, not a NaN", nan)
	}
}

// TestFloat16MatchesReference compares random float32s against a reference
// that searches the sorted float16 values for the nearest one.
func TestFloat16MatchesReference(t *testing.T) {
	var vals []float64 // non-negative finite float16 values, ascending
	for h := uint16(0); h < 0x7c00; h++ {
		vals = append(vals, float64(Float16ToFloat32(h)))
	}
	ref := func(x float32) uint16 {
		a := math.Abs(float64(x))
		var h uint16
		if a >= 65520 {
			h = 0x7c00
		} else {
			i := sort.SearchFloat64s(vals, a) // vals[i] >= a
			switch {
			case i == len(vals):
				h = uint16(i - 1)
			case vals[i] == a || i == 0:
				h = uint16(i)
			default:
				lo, hi := a-vals[i-1], vals[i]-a
				h = uint16(i)
				if lo < hi || (lo == hi && (i-1)%2 == 0) {
					h = uint16(i - 1)
				}
			}
		}
		if math.Signbit(float64(x)) {
			h |= 0x8000
		}
		return h
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		var x float32
		switch i % 3 {
		case 0: // anywhere in the float16 range, log-uniform
			x = float32(math.Ldexp(1+rng.Float64(), rng.IntN(44)-28))
		case 1: // random bits near the float16 exponents
			x = math.Float32frombits(uint32(rng.IntN(1<<30)) + 0x30000000)
		default: // exact ties: a float16 value plus half an ulp
			h := uint16(rng.IntN(0x7bff))
			lo, hi := Float16ToFloat32(h), Float16ToFloat32(h+1)
			x = float32((float64(lo) + float64(hi)) / 2)
		}
		if rng.IntN(2) == 0 {
			x = -x
		}
		if got, want := Float32ToFloat16(x), ref(x); got != want {
			t.Fatalf("Float32ToFloat16(%g = %#08x) = %#04x, reference %#04x", x, math.Float32bits(x), got, want)
		}
	}
}

// TestBFloat16MatchesReference checks round to nearest even against
// float64 arithmetic on the two neighbouring bfloat16 values.
func TestBFloat16MatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200000; i++ {
		b := rng.Uint32()
		x := math.Float32frombits(b)
		if isNaN32(x) || math.IsInf(float64(x), 0) {
			continue
		}
		down := uint16(b >> 16) // truncation toward zero
		lo, hi := float64(BFloat16ToFloat32(down)), float64(BFloat16ToFloat32(down+1))
		if math.IsInf(hi, 0) { // the next step up is 2^128, which overflows to Inf
			hi = math.Copysign(math.Ldexp(1, 128), hi)
		}
		want := down
		dl, dh := math.Abs(float64(x)-lo), math.Abs(hi-float64(x))
		if dh < dl || (dh == dl && down&1 == 1) {
			want = down + 1
		}
		if got := Float32ToBFloat16(x); got != want {
			t.Fatalf("Float32ToBFloat16(%#08x) = %#04x, want %#04x", b, got, want)
		}
	}
}
