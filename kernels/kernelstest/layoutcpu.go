package kernelstest

import (
	"fmt"
	"math"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
)

// NewReversedCPU is the cpu backend with a stand-in library (cpu.Lib)
// whose one layout of its own, 1, is the plain one reversed: its
// convolutions and batch norms leave their outputs reversed, and read
// inputs in either layout. No element lies where dml's plain layout puts
// it, so any op that reads a library-layout buffer as plain computes
// garbage: the suite, and a model's step on this backend, check that the
// backend's layout bookkeeping (kernels/cpu/layout.go) reorders wherever
// it must, as it must for oneDNN's blocked layouts, on any machine.
func NewReversedCPU() kernels.Backend {
	be := cpu.New()
	be.SetLib(&reversed{ref: wholeConv{cpu.New()}})
	return be
}

// NewFailingReorderCPU is NewReversedCPU whose library's reorders fail
// (with an error naming it) once it has done ok of them: a library that
// fails inside a buffer's accessor, where the backend has no error to
// return (kernels.OpFailure).
func NewFailingReorderCPU(ok int) kernels.Backend {
	be := cpu.New()
	be.SetLib(&reversed{ref: wholeConv{cpu.New()}, fail: true, failAfter: ok})
	return be
}

// reversed is that library. Its products run on a second cpu backend's
// whole convolutions (wholeConv) and on float64 loops.
type reversed struct {
	ref       wholeConv
	fail      bool // reorders fail after failAfter of them (NewFailingReorderCPU)
	failAfter int
	reorders  int
}

const reversedLayout cpu.Layout = 1

func (r *reversed) Name() string { return "reversed" }
func (r *reversed) Close()       { r.ref.Close() }

func (r *reversed) Reorder(dst, src []float32, from, to cpu.Layout) error {
	if len(dst) != len(src) || from > reversedLayout || to > reversedLayout {
		return fmt.Errorf("reversed: reorder of %d floats into %d, layouts %d→%d", len(src), len(dst), from, to)
	}
	if r.reorders++; r.fail && r.reorders > r.failAfter {
		return fmt.Errorf("reversed: reorder %d failed (status 5: planted)", r.reorders)
	}
	if from == to {
		copy(dst, src)
		return nil
	}
	for i, v := range src {
		dst[len(dst)-1-i] = v
	}
	return nil
}

// plainOf returns x in plain layout (a copy when it is not).
func plainOf(x []float32, l cpu.Layout) []float32 {
	if l == cpu.Plain {
		return x
	}
	p := make([]float32, len(x))
	for i, v := range x {
		p[len(p)-1-i] = v
	}
	return p
}

// reverse reverses y in place: plain to the library's layout.
func reverse(y []float32) cpu.Layout {
	for i, j := 0, len(y)-1; i < j; i, j = i+1, j-1 {
		y[i], y[j] = y[j], y[i]
	}
	return reversedLayout
}

// run runs f on the reference backend with bufs uploaded, and downloads
// the first outs of them back.
func (r *reversed) run(outs int, f func(b []kernels.Buffer) error, bufs ...[]float32) error {
	bs := make([]kernels.Buffer, len(bufs))
	for i, d := range bufs {
		if d == nil {
			continue
		}
		bs[i] = r.ref.mustAlloc(len(d))
		defer r.ref.Free(bs[i])
		if err := r.ref.Upload(bs[i], d); err != nil {
			return err
		}
	}
	if err := f(bs); err != nil {
		return err
	}
	for i := range outs {
		if bufs[i] != nil {
			if err := r.ref.Download(bufs[i], bs[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *reversed) ConvForward(y, x, w, bias []float32, xl cpu.Layout, n, c, h, wd, o, k, stride, pad int) (cpu.Layout, error) {
	err := r.run(1, func(b []kernels.Buffer) error {
		return r.ref.ConvForward(b[0], b[1], b[2], b[3], n, c, h, wd, o, k, stride, pad)
	}, y, plainOf(x, xl), w, bias)
	return reverse(y), err
}

func (r *reversed) ConvBackwardData(dx, dy, w []float32, dyl cpu.Layout, n, c, h, wd, o, k, stride, pad int) (cpu.Layout, error) {
	err := r.run(1, func(b []kernels.Buffer) error {
		return r.ref.ConvBackwardData(b[0], b[1], b[2], n, c, h, wd, o, k, stride, pad)
	}, dx, plainOf(dy, dyl), w)
	return reverse(dx), err
}

func (r *reversed) ConvBackwardFilter(dw, db, x, dy []float32, xl, dyl cpu.Layout, n, c, h, wd, o, k, stride, pad int) error {
	return r.run(2, func(b []kernels.Buffer) error {
		return r.ref.ConvBackwardFilter(b[0], b[1], b[2], b[3], n, c, h, wd, o, k, stride, pad)
	}, dw, db, plainOf(x, xl), plainOf(dy, dyl))
}

// The batch norms in float64 loops, on plain copies.

func (r *reversed) NormTrain(y, mean, variance, x, gamma, beta []float32, xl cpu.Layout, n, c, hw int, eps float32) (cpu.Layout, error) {
	x = plainOf(x, xl)
	cnt := float64(n * hw)
	for ch := range c {
		var s, ss float64
		for i := range n {
			for _, v := range x[(i*c+ch)*hw : (i*c+ch+1)*hw] {
				s += float64(v)
			}
		}
		mu := s / cnt
		for i := range n {
			for _, v := range x[(i*c+ch)*hw : (i*c+ch+1)*hw] {
				ss += (float64(v) - mu) * (float64(v) - mu)
			}
		}
		mean[ch], variance[ch] = float32(mu), float32(ss/cnt)
	}
	return r.NormInfer(y, x, mean, variance, gamma, beta, cpu.Plain, n, c, hw, eps)
}

func (r *reversed) NormInfer(y, x, mean, variance, gamma, beta []float32, xl cpu.Layout, n, c, hw int, eps float32) (cpu.Layout, error) {
	x = plainOf(x, xl)
	for ch := range c {
		inv := 1 / math.Sqrt(float64(variance[ch])+float64(eps))
		for i := range n {
			lo := (i*c + ch) * hw
			for j, v := range x[lo : lo+hw] {
				y[lo+j] = float32(float64(gamma[ch])*(float64(v)-float64(mean[ch]))*inv + float64(beta[ch]))
			}
		}
	}
	return reverse(y), nil
}

func (r *reversed) NormGrad(dx, dgamma, dbeta, dy, x, mean, variance, gamma []float32, dyl, xl cpu.Layout, n, c, hw int, eps float32) (cpu.Layout, error) {
	x, dy = plainOf(x, xl), plainOf(dy, dyl)
	cnt := float64(n * hw)
	for ch := range c {
		mu, inv := float64(mean[ch]), 1/math.Sqrt(float64(variance[ch])+float64(eps))
		var sdy, sdyx float64
		for i := range n {
			lo := (i*c + ch) * hw
			for j := range hw {
				sdy += float64(dy[lo+j])
				sdyx += float64(dy[lo+j]) * (float64(x[lo+j]) - mu) * inv
			}
		}
		dgamma[ch], dbeta[ch] = float32(sdyx), float32(sdy)
		for i := range n {
			lo := (i*c + ch) * hw
			for j := range hw {
				xh := (float64(x[lo+j]) - mu) * inv
				dx[lo+j] = float32(float64(gamma[ch]) * inv * (float64(dy[lo+j]) - sdy/cnt - xh*sdyx/cnt))
			}
		}
	}
	return reverse(dx), nil
}

// The pools in loops on plain copies, a max pool's workspace the flat
// position of each window's first maximum (its bits), as oneDNN's holds
// the positions of its maxima.

var _ cpu.PoolLib = (*reversed)(nil)

func (r *reversed) PoolWorkspace(s cpu.PoolShape) (int, error) {
	if !s.Max {
		return 0, nil
	}
	oh, ow := kernels.ConvOut(s.H, s.W, s.K, s.Stride, s.Pad)
	return s.N * s.C * oh * ow, nil
}

func (r *reversed) PoolForward(y, ws, x []float32, s cpu.PoolShape) (cpu.Layout, error) {
	x = plainOf(x, s.X)
	oh, ow := kernels.ConvOut(s.H, s.W, s.K, s.Stride, s.Pad)
	for p := range s.N * s.C {
		for oy := range oh {
			for ox := range ow {
				o := (p*oh+oy)*ow + ox
				best, sum := -1, 0.0
				for i := max(oy*s.Stride-s.Pad, 0); i < min(oy*s.Stride-s.Pad+s.K, s.H); i++ {
					for j := max(ox*s.Stride-s.Pad, 0); j < min(ox*s.Stride-s.Pad+s.K, s.W); j++ {
						at := (p*s.H+i)*s.W + j
						if best < 0 || x[at] > x[best] {
							best = at
						}
						sum += float64(x[at])
					}
				}
				if s.Max {
					y[o], ws[o] = x[best], math.Float32frombits(uint32(best))
				} else {
					y[o] = float32(sum / float64(s.K*s.K))
				}
			}
		}
	}
	return reverse(y), nil
}

func (r *reversed) PoolBackward(dx, dy, ws []float32, dyl cpu.Layout, s cpu.PoolShape) (cpu.Layout, error) {
	dy = plainOf(dy, dyl)
	oh, ow := kernels.ConvOut(s.H, s.W, s.K, s.Stride, s.Pad)
	acc := make([]float64, len(dx))
	for p := range s.N * s.C {
		for oy := range oh {
			for ox := range ow {
				o := (p*oh+oy)*ow + ox
				if s.Max {
					acc[math.Float32bits(ws[o])] += float64(dy[o])
					continue
				}
				for i := oy * s.Stride; i < oy*s.Stride+s.K; i++ {
					for j := ox * s.Stride; j < ox*s.Stride+s.K; j++ {
						acc[(p*s.H+i)*s.W+j] += float64(dy[o]) / float64(s.K*s.K)
					}
				}
			}
		}
	}
	for i, v := range acc {
		dx[i] = float32(v)
	}
	return reverse(dx), nil
}
