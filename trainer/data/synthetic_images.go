package data

import (
	"math"
	"math/rand/v2"
)

// SyntheticImagesConfig describes an image dataset for SyntheticImages.
type SyntheticImagesConfig struct {
	Rows    int   // samples, ≥ 0
	Shape   Shape // each image's C×H×W
	Classes int   // ≥ 2
	Noise   float64
	Seed    uint64
}

// SyntheticImages generates images a convolutional network can learn, for
// throughput runs anywhere (as Horovod's synthetic benchmark does) and for
// tests: each class k has a pattern of its own, a sum of three plane waves
// per channel with random directions, frequencies and phases,
//
//	P_k[c](y, x) = Σ_j sin(2π(f_kcj·(x·cos θ_kcj + y·sin θ_kcj)/W) + φ_kcj)
//
// and a sample of class k is P_k shifted by a random offset of up to a
// quarter of the image in each direction (wrapping round), scaled by 1/√3,
// plus Noise·ε, ε ~ N(0, 1) per pixel. The shifts make the patterns local
// features rather than fixed pixels (what convolutions are for); Noise sets
// how hard the task is, as for Synthetic. Labels are balanced and
// shuffled. Deterministic for a seed.
func SyntheticImages(cfg SyntheticImagesConfig) (*Dense, error) {
	s := cfg.Shape
	n := s.Size()
	switch {
	case cfg.Rows < 0 || s.C < 1 || s.H < 1 || s.W < 1 || cfg.Classes < 2:
		return nil, errorf(ErrConfig, "synthetic-images: rows=%d shape=%v classes=%d, want rows ≥ 0, a positive C×H×W, classes ≥ 2", cfg.Rows, s, cfg.Classes)
	case cfg.Classes > math.MaxInt32:
		return nil, errorf(ErrConfig, "synthetic-images: %d classes do not fit int32 labels", cfg.Classes)
	case !(cfg.Noise >= 0) || math.IsInf(cfg.Noise, 0):
		return nil, errorf(ErrConfig, "synthetic-images: noise %v, want a finite value ≥ 0", cfg.Noise)
	case n <= 0 || s.C > MaxDenseElements/(s.H*s.W) || cfg.Rows > MaxDenseElements/n || cfg.Classes > MaxDenseElements/n:
		return nil, errorf(ErrTooLarge, "synthetic-images: %d images (or %d class patterns) of %v exceed %d elements", cfg.Rows, cfg.Classes, s, MaxDenseElements)
	}
	r := rand.New(newPCG(cfg.Seed, streamImagePatterns))
	patterns := make([]float64, cfg.Classes*n)
	for k := range cfg.Classes {
		for c := range s.C {
			p := patterns[k*n+c*s.H*s.W : k*n+(c+1)*s.H*s.W]
			for range 3 {
				th, f, ph := 2*math.Pi*r.Float64(), 1+3*r.Float64(), 2*math.Pi*r.Float64()
				cx, cy := math.Cos(th)*f/float64(s.W), math.Sin(th)*f/float64(s.W)
				for y := range s.H {
					for x := range s.W {
						p[y*s.W+x] += math.Sin(2*math.Pi*(cx*float64(x)+cy*float64(y))+ph) / math.Sqrt(3)
					}
				}
			}
		}
	}
	y := balancedLabels(cfg.Rows, cfg.Classes, cfg.Seed, streamImageLabels)
	x := make([]float32, cfg.Rows*n)
	r = rand.New(newPCG(cfg.Seed, streamImageNoise))
	for i, l := range y {
		dy, dx := r.IntN(s.H/4+1), r.IntN(s.W/4+1)
		pat := patterns[int(l)*n : (int(l)+1)*n]
		img := x[i*n : (i+1)*n]
		for c := range s.C {
			for yy := range s.H {
				src := pat[c*s.H*s.W+((yy+dy)%s.H)*s.W:]
				dst := img[c*s.H*s.W+yy*s.W : c*s.H*s.W+(yy+1)*s.W]
				for xx := range dst {
					dst[xx] = float32(src[(xx+dx)%s.W] + cfg.Noise*r.NormFloat64())
				}
			}
		}
	}
	return &Dense{X: x, Y: y, Rows: cfg.Rows, Cols: n, Classes: cfg.Classes, Image: s}, nil
}
