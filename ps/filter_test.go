package ps

import (
	"errors"
	"github.com/dml-project/dml/internal/half"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestSignificantlyModifiedKeepsResidue: for every key, the sum of what the
// filter sent plus its residue equals the sum of what was pushed. Values are
// multiples of 1/64, so float32 sums are exact and the check is equality.
func TestSignificantlyModifiedKeepsResidue(t *testing.T) {
	const p = 50
	rng := rand.New(rand.NewPCG(5, 6))
	f := SignificantlyModified{Threshold: 0.5}.NewFilter(p)
	in := make([]float32, p)
	sent := make([]float32, p)
	sentEntries, total := 0, 0
	for step := 0; step < 40; step++ {
		u := Update{Dense: step%2 == 0}
		if u.Dense {
			u.Values = make([]float32, p)
			for k := range u.Values {
				u.Values[k] = float32(rng.IntN(65)-32) / 64
				in[k] += u.Values[k]
			}
		} else { // keyed push of a random working set
			for k := 0; k < p; k++ {
				if rng.IntN(3) == 0 {
					v := float32(rng.IntN(65)-32) / 64
					u.Keys = append(u.Keys, int64(k))
					u.Values = append(u.Values, v)
					in[k] += v
				}
			}
		}
		total += len(u.Values)
		if err := f.Filter(&u); err != nil {
			t.Fatal(err)
		}
		for i, k := range u.Keys {
			if u.Values[i] <= 0.5 && u.Values[i] >= -0.5 {
				t.Fatalf("step %d: sent %v at key %d, not above the threshold", step, u.Values[i], k)
			}
			sent[k] += u.Values[i]
		}
		sentEntries += len(u.Keys)
	}
	res := Residue(f)
	for k := range in {
		if sent[k]+res[k] != in[k] {
			t.Fatalf("key %d: sent %v + residue %v != pushed %v", k, sent[k], res[k], in[k])
		}
		if res[k] > 0.5 || res[k] < -0.5 {
			t.Fatalf("key %d: residue %v above the threshold", k, res[k])
		}
	}
	if sentEntries == 0 || sentEntries >= total {
		t.Fatalf("filter sent %d of %d entries: test does not exercise it", sentEntries, total)
	}
}

func TestCompressFilter(t *testing.T) {
	u := Update{Dense: true, Values: []float32{1, 2.5, -3}}
	if err := (Compress{Format: Float16}).NewFilter(3).Filter(&u); err != nil || u.Encoding != Float16 {
		t.Fatalf("Filter = %v, encoding %v", err, u.Encoding)
	}
	u = Update{Keys: []int64{4, 9}, Values: []float32{1, 1e5}}
	err := (Compress{Format: Float16}).NewFilter(10).Filter(&u)
	if !errors.Is(err, ErrArgument) || !strings.Contains(err.Error(), "key 9") {
		t.Fatalf("overflow: err = %v, want ErrArgument naming key 9", err)
	}
	u = Update{Dense: true, Values: []float32{1e30, 65519}}
	if err := (Compress{Format: BFloat16}).NewFilter(2).Filter(&u); err != nil || u.Encoding != BFloat16 {
		t.Fatalf("bf16 of 1e30: %v", err)
	}
	// The overflow limits are exactly where the conversions give Inf.
	for _, tc := range []struct {
		f    Encoding
		v    float32
		fail bool
	}{
		{Float16, 65519.996, false}, {Float16, 65520, true}, {Float16, -65520, true},
		{BFloat16, math.Float32frombits(0x7f7f7fff), false}, {BFloat16, math.Float32frombits(0x7f7f8000), true},
		{BFloat16, math.MaxFloat32, true},
	} {
		u := Update{Dense: true, Values: []float32{tc.v}}
		err := (Compress{Format: tc.f}).NewFilter(1).Filter(&u)
		var back float32
		if tc.f == Float16 {
			back = half.Float16ToFloat32(half.Float32ToFloat16(tc.v))
		} else {
			back = half.BFloat16ToFloat32(half.Float32ToBFloat16(tc.v))
		}
		if (err != nil) != tc.fail || math.IsInf(float64(back), 0) != tc.fail {
			t.Errorf("%v of %g: err %v, converts to %g; want failure %v", tc.f, tc.v, err, back, tc.fail)
		}
	}
}

func TestParseFilters(t *testing.T) {
	got, err := ParseFilters("sigmod:0.25, fp16")
	want := []FilterSpec{SignificantlyModified{Threshold: 0.25}, Compress{Format: Float16}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseFilters = %v, %v", got, err)
	}
	if got[0].String() != "sigmod:0.25" || got[1].String() != "fp16" {
		t.Errorf("String() = %q, %q", got[0], got[1])
	}
	if got, err := ParseFilters("bf16"); err != nil || !reflect.DeepEqual(got, []FilterSpec{Compress{Format: BFloat16}}) {
		t.Errorf("bf16: %v, %v", got, err)
	}
	if got, err := ParseFilters(""); err != nil || got != nil {
		t.Errorf("empty: %v, %v", got, err)
	}
	for _, bad := range []string{"sigmod", "sigmod:x", "sigmod:-1", "fp8", "fp16:3"} {
		if _, err := ParseFilters(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseFilters(%q) err = %v, want ErrConfig", bad, err)
		}
	}
}
