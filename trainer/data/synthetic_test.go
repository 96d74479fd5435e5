package data

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func TestSyntheticDeterministic(t *testing.T) {
	cfg := SyntheticConfig{Rows: 103, Cols: 7, Classes: 4, Noise: 0.5, Seed: 42}
	a, err := Synthetic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Synthetic(cfg)
	if !slices.Equal(a.X, b.X) || !slices.Equal(a.Y, b.Y) {
		t.Fatal("same seed, different data")
	}
	cfg.Seed++
	c, _ := Synthetic(cfg)
	if slices.Equal(a.X, c.X) || slices.Equal(a.Y, c.Y) {
		t.Fatal("different seeds, same data")
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	// Balanced classes: 103 = 4·25 + 3.
	count := make([]int, 4)
	for _, l := range a.Y {
		count[l]++
	}
	if !slices.Equal(count, []int{26, 26, 26, 25}) {
		t.Fatalf("class counts %v", count)
	}
	if slices.IsSorted(a.Y) {
		t.Fatal("labels are not shuffled")
	}
}

// nearestMeanAccuracy fits class means on d and scores d with them.
func nearestMeanAccuracy(d *Dense) float64 {
	means := make([]float64, d.Classes*d.Cols)
	count := make([]int, d.Classes)
	for i := 0; i < d.Rows; i++ {
		count[d.Y[i]]++
		for j, v := range d.Row(i) {
			means[int(d.Y[i])*d.Cols+j] += float64(v)
		}
	}
	for k := range d.Classes {
		for j := range d.Cols {
			means[k*d.Cols+j] /= float64(max(count[k], 1))
		}
	}
	correct := 0
	for i := 0; i < d.Rows; i++ {
		best, bestDist := -1, math.Inf(1)
		for k := range d.Classes {
			dist := 0.0
			for j, v := range d.Row(i) {
				e := float64(v) - means[k*d.Cols+j]
				dist += e * e
			}
			if dist < bestDist {
				best, bestDist = k, dist
			}
		}
		if best == int(d.Y[i]) {
			correct++
		}
	}
	return float64(correct) / float64(d.Rows)
}

func TestSyntheticSeparability(t *testing.T) {
	const cols = 32 // √(cols/2) = 4
	for _, tc := range []struct {
		noise    float64
		min, max float64 // nearest-mean accuracy bounds
	}{
		{0, 1, 1},
		{0.5, 1, 1},
		{40, 0, 0.4}, // chance is 0.2; fitting the means on the data itself adds a little
	} {
		d, err := Synthetic(SyntheticConfig{Rows: 2000, Cols: cols, Classes: 5, Noise: tc.noise, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		if acc := nearestMeanAccuracy(d); acc < tc.min || acc > tc.max {
			t.Errorf("noise %v: nearest-mean accuracy %.3f, want in [%v, %v]", tc.noise, acc, tc.min, tc.max)
		}
	}
}

func TestSyntheticConfigErrors(t *testing.T) {
	for _, cfg := range []SyntheticConfig{
		{Rows: -1, Cols: 2, Classes: 2},
		{Rows: 1, Cols: 0, Classes: 2},
		{Rows: 1, Cols: 2, Classes: 1},
		{Rows: 1, Cols: 2, Classes: 2, Noise: -1},
		{Rows: 1, Cols: 2, Classes: 2, Noise: math.NaN()},
		{Rows: 1, Cols: 2, Classes: 2, Noise: math.Inf(1)},
	} {
		if _, err := Synthetic(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: got %v, want ErrConfig", cfg, err)
		}
	}
	if _, err := Synthetic(SyntheticConfig{Rows: 1 << 20, Cols: 1 << 12, Classes: 2}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("huge: got %v, want ErrTooLarge", err)
	}
	d, err := Synthetic(SyntheticConfig{Rows: 0, Cols: 3, Classes: 2})
	if err != nil || d.Rows != 0 || d.Validate() != nil {
		t.Errorf("zero rows: %v %+v", err, d)
	}
}

func TestSyntheticSparse(t *testing.T) {
	cfg := SyntheticSparseConfig{Rows: 5000, Features: 100_000, NNZ: 30, Seed: 9}
	s, truth, err := SyntheticSparseWithTruth(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil { // also checks sorted, distinct indices
		t.Fatal(err)
	}
	if s.Rows != 5000 || s.Cols != 100_000 || s.Classes != 2 || s.NNZ() != 5000*30 {
		t.Fatalf("rows=%d cols=%d classes=%d nnz=%d", s.Rows, s.Cols, s.Classes, s.NNZ())
	}
	for i := 0; i < s.Rows; i++ {
		if ind, _ := s.Row(i); len(ind) != 30 {
			t.Fatalf("row %d has %d nonzeros, want 30", i, len(ind))
		}
	}
	for _, v := range s.Values {
		if !(v > 0 && v <= 1) {
			t.Fatalf("value %v outside (0, 1]", v)
		}
	}

	// Power law: frequency falls with the column number, roughly as (1+j)^-1.1.
	freq := make([]int, s.Cols)
	for _, j := range s.Indices {
		freq[j]++
	}
	band := func(lo, hi int) float64 {
		n := 0
		for _, f := range freq[lo:hi] {
			n += f
		}
		return float64(n) / float64(hi-lo)
	}
	f1, f2, f3 := band(10, 20), band(1000, 2000), band(50_000, 100_000)
	if !(f1 > 10*f2 && f2 > 10*f3) {
		t.Errorf("mean frequency near column 10: %.1f, 1000: %.2f, 50000: %.3f; want a steep decline", f1, f2, f3)
	}

	// Labels follow the hidden model: sign(w·x) predicts them well, and
	// both classes occur.
	w := make(map[int32]float32)
	for k, j := range truth.Features {
		w[j] = truth.Weights[k]
	}
	correct, ones := 0, 0
	for i := 0; i < s.Rows; i++ {
		ind, val := s.Row(i)
		z := 0.0
		for k, j := range ind {
			z += float64(w[j]) * float64(val[k])
		}
		if (z > 0) == (s.Y[i] == 1) {
			correct++
		}
		ones += int(s.Y[i])
	}
	if acc := float64(correct) / float64(s.Rows); acc < 0.75 {
		t.Errorf("sign(w·x) matches %.3f of labels, want ≥ 0.75", acc)
	}
	if ones < s.Rows/5 || ones > 4*s.Rows/5 {
		t.Errorf("%d of %d labels are 1", ones, s.Rows)
	}

	// Deterministic for a seed.
	s2, truth2, _ := SyntheticSparseWithTruth(cfg)
	if !slices.Equal(s.Indices, s2.Indices) || !slices.Equal(s.Values, s2.Values) || !slices.Equal(s.Y, s2.Y) || !slices.Equal(truth.Weights, truth2.Weights) {
		t.Fatal("same seed, different data")
	}
	cfg.Seed++
	s3, _ := SyntheticSparse(cfg)
	if slices.Equal(s.Indices, s3.Indices) {
		t.Fatal("different seeds, same data")
	}
}

// TestSyntheticSparseSteep: a steep exponent concentrates the draws on a few
// features, and rows still get exactly NNZ distinct ones.
func TestSyntheticSparseSteep(t *testing.T) {
	for _, cfg := range []SyntheticSparseConfig{
		{Rows: 200, Features: 1000, NNZ: 50, Zipf: 6, Seed: 1},
		{Rows: 20, Features: 40, NNZ: 40, TrueNNZ: 40, Zipf: 1.5, Seed: 2}, // every feature in every row
		{Rows: 3, Features: 1, NNZ: 1, Seed: 3},
		{Rows: 5, Features: 10, NNZ: 0, Seed: 4},
	} {
		s, err := SyntheticSparse(cfg)
		if err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		if s.NNZ() != cfg.Rows*cfg.NNZ {
			t.Fatalf("%+v: nnz %d", cfg, s.NNZ())
		}
	}
}

func TestSyntheticSparseConfigErrors(t *testing.T) {
	for _, cfg := range []SyntheticSparseConfig{
		{Rows: -1, Features: 10, NNZ: 1},
		{Rows: 1, Features: 0, NNZ: 0},
		{Rows: 1, Features: MaxSyntheticFeatures + 1, NNZ: 1},
		{Rows: 1, Features: 10, NNZ: 11},
		{Rows: 1, Features: 10, NNZ: -1},
		{Rows: 1, Features: 10, NNZ: 1, TrueNNZ: 11},
		{Rows: 1, Features: 10, NNZ: 1, Zipf: 1},
		{Rows: 1, Features: 10, NNZ: 1, Zipf: math.NaN()},
		{Rows: 1, Features: 10, NNZ: 1, Signal: -1},
	} {
		if _, err := SyntheticSparse(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: got %v, want ErrConfig", cfg, err)
		}
	}
}
