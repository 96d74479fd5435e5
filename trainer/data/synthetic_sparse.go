package data

import (
	"math"
	"math/rand/v2"
	"slices"
)

// MaxSyntheticFeatures bounds SyntheticSparseConfig.Features (the generator
// keeps 8 bytes of bookkeeping per feature).
const MaxSyntheticFeatures = 1 << 26

// SyntheticSparseConfig describes a binary sparse dataset for
// SyntheticSparse. Zero values of Zipf, TrueNNZ and Signal take the defaults
// in their comments.
type SyntheticSparseConfig struct {
	Rows     int // samples, ≥ 0
	Features int // columns, 1..MaxSyntheticFeatures
	NNZ      int // nonzeros per row, 0..Features
	// Zipf is the exponent s > 1 of feature popularity: feature j is drawn
	// with probability ∝ (1+j)^−s, so low column numbers are the common
	// ones. 0 means 1.1.
	Zipf float64
	// TrueNNZ is the number of nonzero weights of the hidden model,
	// 1..Features. 0 means min(Features, 1000).
	TrueNNZ int
	// Signal is the standard deviation, over the generated rows, of the
	// logit w·x that the labels are drawn from; larger means labels closer to
	// sign(w·x). 0 means 4 (Bayes accuracy about 0.85).
	Signal float64
	Seed   uint64
}

// SparseTruth is the hidden logistic model behind SyntheticSparse's labels:
// P(y=1 | x) = σ(Σ_k Weights[k]·x[Features[k]]). Features are ascending.
type SparseTruth struct {
	Features []int32
	Weights  []float32
}

// SyntheticSparse generates a binary classification dataset with power-law
// feature frequencies; see SyntheticSparseWithTruth.
func SyntheticSparse(cfg SyntheticSparseConfig) (*Sparse, error) {
	s, _, err := SyntheticSparseWithTruth(cfg)
	return s, err
}

// SyntheticSparseWithTruth generates the dataset of SyntheticSparse and
// returns the model that labelled it:
//
//  1. Each row gets NNZ distinct features drawn from the Zipf(s = Zipf)
//     distribution over [0, Features); a draw that repeats one of the row's
//     features is redrawn, and after 4·NNZ redraws the row is completed with
//     uniform features (so a steep exponent still gives exactly NNZ
//     nonzeros). Values are uniform in (0, 1]; indices are sorted.
//  2. The hidden model has TrueNNZ distinct features drawn the same way (so
//     common features tend to matter) with N(0, 1) weights, then scaled so
//     the logits z_i = w·x_i have standard deviation Signal over the rows.
//  3. y_i = 1 with probability σ(z_i), else 0.
//
// Rows, model and labels come from separate PCG streams of Seed, so the
// result is deterministic for a seed (Zipf and float variates from
// math/rand/v2).
func SyntheticSparseWithTruth(cfg SyntheticSparseConfig) (*Sparse, *SparseTruth, error) {
	if cfg.Zipf == 0 {
		cfg.Zipf = 1.1
	}
	if cfg.TrueNNZ == 0 {
		cfg.TrueNNZ = min(cfg.Features, 1000)
	}
	if cfg.Signal == 0 {
		cfg.Signal = 4
	}
	switch {
	case cfg.Rows < 0 || cfg.Features < 1 || cfg.Features > MaxSyntheticFeatures:
		return nil, nil, errorf(ErrConfig, "synthetic sparse: rows=%d features=%d, want rows ≥ 0 and features in 1..%d", cfg.Rows, cfg.Features, MaxSyntheticFeatures)
	case cfg.NNZ < 0 || cfg.NNZ > cfg.Features || cfg.TrueNNZ < 1 || cfg.TrueNNZ > cfg.Features:
		return nil, nil, errorf(ErrConfig, "synthetic sparse: nnz=%d trueNNZ=%d, want 0 ≤ nnz ≤ features and 1 ≤ trueNNZ ≤ features (%d)", cfg.NNZ, cfg.TrueNNZ, cfg.Features)
	case cfg.NNZ > 0 && cfg.Rows > math.MaxInt64/cfg.NNZ:
		return nil, nil, errorf(ErrTooLarge, "synthetic sparse: %d rows × %d nonzeros overflows", cfg.Rows, cfg.NNZ)
	case !(cfg.Zipf > 1) || math.IsInf(cfg.Zipf, 0):
		return nil, nil, errorf(ErrConfig, "synthetic sparse: zipf exponent %v, want a finite value > 1", cfg.Zipf)
	case !(cfg.Signal > 0) || math.IsInf(cfg.Signal, 0):
		return nil, nil, errorf(ErrConfig, "synthetic sparse: signal %v, want a finite value > 0", cfg.Signal)
	}

	// seen[j] == mark when feature j is already in the current draw.
	seen := make([]uint32, cfg.Features)
	mark := uint32(0)

	// 2. The hidden model (drawn first so it does not depend on Rows).
	tsrc := newPCG(cfg.Seed, streamSparseTruth)
	truth := &SparseTruth{Features: make([]int32, cfg.TrueNNZ), Weights: make([]float32, cfg.TrueNNZ)}
	tr := rand.New(tsrc)
	mark++
	drawDistinctZipf(rand.NewZipf(tr, cfg.Zipf, 1, uint64(cfg.Features-1)), tsrc, cfg.Features, seen, mark, truth.Features)
	slices.Sort(truth.Features)
	w := make([]float32, cfg.Features) // dense copy of the model
	for k, j := range truth.Features {
		truth.Weights[k] = float32(tr.NormFloat64())
		w[j] = truth.Weights[k]
	}

	// 1. Rows, and the unscaled logits.
	s := &Sparse{
		Indptr:      make([]int64, cfg.Rows+1),
		Indices:     make([]int32, cfg.Rows*cfg.NNZ),
		Values:      make([]float32, cfg.Rows*cfg.NNZ),
		Y:           make([]int32, cfg.Rows),
		Rows:        cfg.Rows,
		Cols:        cfg.Features,
		Classes:     2,
		LabelValues: []int64{0, 1},
	}
	rsrc := newPCG(cfg.Seed, streamSparseRows)
	rr := rand.New(rsrc)
	zipf := rand.NewZipf(rr, cfg.Zipf, 1, uint64(cfg.Features-1))
	z := make([]float64, cfg.Rows)
	var sum, sumSq float64
	for i := 0; i < cfg.Rows; i++ {
		lo, hi := i*cfg.NNZ, (i+1)*cfg.NNZ
		s.Indptr[i+1] = int64(hi)
		idx, val := s.Indices[lo:hi], s.Values[lo:hi]
		mark++
		if mark == 0 { // wrapped: clear the stamps
			clear(seen)
			mark = 1
		}
		drawDistinctZipf(zipf, rsrc, cfg.Features, seen, mark, idx)
		slices.Sort(idx)
		for k, j := range idx {
			val[k] = 1 - rr.Float32()
			z[i] += float64(w[j]) * float64(val[k])
		}
		sum += z[i]
		sumSq += z[i] * z[i]
	}

	// Scale the model to the requested logit spread.
	scale := 1.0
	if cfg.Rows > 1 {
		mean := sum / float64(cfg.Rows)
		if sd := math.Sqrt(max(0, sumSq/float64(cfg.Rows)-mean*mean)); sd > 0 {
			scale = cfg.Signal / sd
		}
	}
	for k := range truth.Weights {
		truth.Weights[k] = float32(float64(truth.Weights[k]) * scale)
	}

	// 3. Labels.
	lr := rand.New(newPCG(cfg.Seed, streamSparseLabels))
	for i := range s.Y {
		if lr.Float64() < 1/(1+math.Exp(-scale*z[i])) {
			s.Y[i] = 1
		}
	}
	return s, truth, nil
}

// drawDistinctZipf fills out with distinct features: Zipf draws, redrawing
// repeats, and after 4·len(out) redraws uniform draws moved to the next
// unused feature (len(out) ≤ features, so this ends). Chosen features get
// seen[j] = mark; seen must hold no mark beforehand.
func drawDistinctZipf(zipf *rand.Zipf, src rand.Source, features int, seen []uint32, mark uint32, out []int32) {
	redraws := 4 * len(out)
	for k := range out {
		j := int(zipf.Uint64())
		for seen[j] == mark && redraws > 0 {
			redraws--
			j = int(zipf.Uint64())
		}
		if seen[j] == mark {
			j = int(uniformN(src, uint64(features)))
			for seen[j] == mark {
				j = (j + 1) % features
			}
		}
		seen[j] = mark
		out[k] = int32(j)
	}
}
