package trainer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/internal/numtest"
)

// deviceBackend is the CPU backend behind buffers that hide their memory,
// as a device's do (they are not kernels.HostBuffers), and that count the
// host↔device copies: the trainer must then take the Download / AllReduce
// / Upload path a GPU takes, and give the same weights bit for bit.
type deviceBackend struct {
	b                   *cpu.Backend
	uploads, downloads  int
	allocs, frees, live int
	failAlloc           int // the failAlloc-th Alloc fails (0: none)
}

type devBuf struct{ b kernels.Buffer }

func (d devBuf) Len() int { return d.b.Len() }

func un(b kernels.Buffer) kernels.Buffer {
	if b == nil {
		return nil
	}
	return b.(devBuf).b
}

func (d *deviceBackend) Name() string { return "fake-device" }
func (d *deviceBackend) Alloc(n int) (kernels.Buffer, error) {
	if d.allocs+1 == d.failAlloc {
		return nil, fmt.Errorf("fake-device: Alloc(%d): out of memory: %w", n, kernels.ErrDevice)
	}
	b, err := d.b.Alloc(n)
	d.allocs++
	d.live++
	return devBuf{b}, err
}
func (d *deviceBackend) Free(b kernels.Buffer) error {
	if b == nil {
		return nil
	}
	d.frees++
	d.live--
	return d.b.Free(un(b))
}
func (d *deviceBackend) View(b kernels.Buffer, off, n int) kernels.Buffer {
	return devBuf{d.b.View(un(b), off, n)}
}
func (d *deviceBackend) Upload(dst kernels.Buffer, src []float32) error {
	d.uploads++
	return d.b.Upload(un(dst), src)
}
func (d *deviceBackend) Download(dst []float32, src kernels.Buffer) error {
	d.downloads++
	return d.b.Download(dst, un(src))
}
func (d *deviceBackend) Copy(dst, src kernels.Buffer) error     { return d.b.Copy(un(dst), un(src)) }
func (d *deviceBackend) Fill(b kernels.Buffer, v float32) error { return d.b.Fill(un(b), v) }
func (d *deviceBackend) Sync() error                            { return d.b.Sync() }
func (d *deviceBackend) Close() error                           { return d.b.Close() }
func (d *deviceBackend) Gemm(ta, tb bool, m, n, k int, alpha float32, a, b kernels.Buffer, beta float32, c kernels.Buffer) error {
	return d.b.Gemm(ta, tb, m, n, k, alpha, un(a), un(b), beta, un(c))
}
func (d *deviceBackend) AddBias(x, bias kernels.Buffer, rows, cols int) error {
	return d.b.AddBias(un(x), un(bias), rows, cols)
}
func (d *deviceBackend) SumRows(dst, x kernels.Buffer, rows, cols int, beta float32) error {
	return d.b.SumRows(un(dst), un(x), rows, cols, beta)
}
func (d *deviceBackend) Relu(y, x kernels.Buffer) error { return d.b.Relu(un(y), un(x)) }
func (d *deviceBackend) ReluGrad(dx, dy, y kernels.Buffer) error {
	return d.b.ReluGrad(un(dx), un(dy), un(y))
}
func (d *deviceBackend) SoftmaxCrossEntropy(g, z, l kernels.Buffer, rows, cols int, scale float32, st kernels.Buffer) error {
	return d.b.SoftmaxCrossEntropy(un(g), un(z), un(l), rows, cols, scale, un(st))
}
func (d *deviceBackend) SigmoidCrossEntropy(g, z, l kernels.Buffer, rows int, scale float32, st kernels.Buffer) error {
	return d.b.SigmoidCrossEntropy(un(g), un(z), un(l), rows, scale, un(st))
}
func (d *deviceBackend) Predict(out, x kernels.Buffer, rows, cols int) error {
	return d.b.Predict(un(out), un(x), rows, cols)
}
func (d *deviceBackend) Axpy(alpha float32, x, y kernels.Buffer) error {
	return d.b.Axpy(alpha, un(x), un(y))
}
func (d *deviceBackend) Scale(alpha float32, x kernels.Buffer) error { return d.b.Scale(alpha, un(x)) }
func (d *deviceBackend) Sum(dst kernels.Buffer, srcs ...kernels.Buffer) error {
	u := make([]kernels.Buffer, len(srcs))
	for i, s := range srcs {
		u[i] = un(s)
	}
	return d.b.Sum(un(dst), u...)
}
func (d *deviceBackend) Dot(x, y kernels.Buffer) (float64, error) { return d.b.Dot(un(x), un(y)) }
func (d *deviceBackend) NonFinite(x kernels.Buffer) (int, error)  { return d.b.NonFinite(un(x)) }
func (d *deviceBackend) Optimize(w, g, s kernels.Buffer, u optim.Update) error {
	return d.b.Optimize(un(w), un(g), un(s), u)
}

var _ kernels.Backend = (*deviceBackend)(nil)

// TestDeviceBackendSameWeights: on a backend whose buffers are not host
// memory, AllReduce and parameter-server training take the copy path and
// give the CPU backend's weights bit for bit; per step, AllReduce makes one
// upload (the batch, labels included) and one download (the gradient) plus
// one upload of the reduced gradient; every buffer is freed at the end.
func TestDeviceBackendSameWeights(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		ranks int
	}{{"allreduce", synthCfg(), 2}, {"ps-bsp", psCfg(ps.BSP, 1), 3}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.MaxSteps = 9
			ref := mustRun(t, tc.ranks, cfg)
			devs := make([]*deviceBackend, tc.ranks)
			got, errs := runWorldWith(t, tc.ranks, cfg, func(r int) kernels.Backend {
				devs[r] = &deviceBackend{b: cpu.New()}
				return devs[r]
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			for r := range got {
				if !slices.Equal(got[r].Params, ref[r].Params) {
					t.Errorf("rank %d: weights differ from the CPU backend's by %.3g", r, numtest.MaxRelDiff(got[r].Params, ref[r].Params))
				}
				if devs[r].live != 0 {
					t.Errorf("rank %d: %d of %d buffers not freed", r, devs[r].live, devs[r].allocs)
				}
			}
			if tc.name == "allreduce" {
				d := devs[1]
				// Per step: batch upload, gradient download, reduced-gradient
				// upload; besides: initial weights, final weights, and
				// evaluation (one download per test batch).
				// evaluation (4 batches: an upload and a download each).
				if n := cfg.MaxSteps; d.uploads < 2*n || d.uploads > 2*n+8 || d.downloads < n || d.downloads > n+8 {
					t.Errorf("%d uploads, %d downloads in %d steps: want 2 and 1 a step, a few more outside", d.uploads, d.downloads, n)
				}
			}
		})
	}
}

// TestAllocFailureReported: a device that runs out of memory part-way
// through the model's buffers ends the run with an error that wraps
// ErrDevice and names what was being allocated, and the buffers already
// allocated are freed.
func TestAllocFailureReported(t *testing.T) {
	for _, n := range []int{1, 3, 6} {
		dev := &deviceBackend{b: cpu.New(), failAlloc: n}
		_, errs := runWorldWith(t, 1, synthCfg(), func(int) kernels.Backend { return dev })
		err := errs[0]
		if !errors.Is(err, kernels.ErrDevice) || !strings.Contains(err.Error(), "allocating the") {
			t.Errorf("alloc %d fails: got %v, want ErrDevice naming the buffer", n, err)
		}
		if dev.live != 0 {
			t.Errorf("alloc %d fails: %d buffers left allocated", n, dev.live)
		}
	}
}
