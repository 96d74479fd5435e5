package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/model"
)

// maxBenchOpsBatch bounds bench ops' --batch (sizes computed from it stay
// far from overflow; the memory check refuses what does not fit).
const maxBenchOpsBatch = 1 << 20

// cmdBenchOps is dml bench ops: each convolution, batch-norm and pool shape of
// a preset network, on dml's own kernels and on the backend's library,
// side by side.
func cmdBenchOps(args []string, stdout io.Writer) (err error) {
	defer kernels.RecoverOp(&err) // a library failing inside a reorder: its one line
	fs := newFlags("bench ops", `Usage: dml bench ops [flags]

Times each convolution shape of a preset network (its forward pass,
weight gradient and input gradient, as a training step runs them) and each
batch-norm shape (training forward and backward) on dml's own kernels and
on the library that --kernels names (onednn on --backend blas; cudnn on
--backend cuda), rounds alternating between the two, and prints the best
of each with its GFLOP/s (convolutions: 2·multiply-adds of the three
products) or GB/s (batch norm: the bytes its passes must move at least:
x read twice and y written forward, x and dy read twice and dx written
backward; the library's data made by its own convolutions, so that it
lies in the library's layout, as in training) and each pool shape
(forward and backward; GB/s of x and dx, y and dy moved once), where the
library pools. --kernels auto picks, in a training run, the faster of
the two per convolution shape, measured the same way; a library pools
data in its own layout, dml's kernels plain data (where the library
leaves a shape plain, e.g. channels that fill none of its blocks, and
dml's kernel has a vector path for it, both columns are dml's).`, stdout)
	modelName := fs.String("model", "resnet20", "preset network: resnet20, vgg16, resnet50, alexnet (3×32×32) or lenet5 (1×28×28)")
	shapeFlag := fs.String("shape", "", "each image's CxHxW (default: the preset's, above); resnet50 takes torchvision's stem, with its max pool, from 64×64")
	batch := fs.Int("batch", 64, "samples per step (a rank's batch)")
	rounds := fs.Int("rounds", 5, "rounds of each shape on each provider (the best counts)")
	backend := fs.String("backend", "blas", "backend: blas (library: onednn) or cuda (cudnn)")
	libs := fs.String("kernels", "", "the library to compare with dml's kernels (default: onednn on blas, cudnn on cuda)")
	threads := fs.Int("blas-threads", 1, "compute threads (OpenBLAS and oneDNN)")
	if err := parse(fs, args); err != nil {
		return err
	}
	arch, err := opsArch(*modelName, *shapeFlag)
	if err != nil {
		return err
	}
	if err := checkOpsRange(*batch, *rounds, *threads, *backend); err != nil {
		return err
	}
	// Each backend holds a layer's input, output and their gradients, and
	// its scratch, at the largest shape (counted over all layers: more).
	rows := float64(*batch)
	need := 2 * 4 * (4*rows*float64(arch.ActivationFloats()) + float64(arch.ScratchFloats(*batch)+arch.KeptColumns(*batch)))
	if err := guardMemory("bench ops", fmt.Sprintf("%s at batch %d", *modelName, *batch), need, "lower --batch"); err != nil {
		return err
	}
	lib := *libs
	if lib == "" {
		lib = map[string]string{"blas": kernels.LibOneDNN, "cuda": kernels.LibCUDNN}[*backend]
	}
	choice, err := kernels.ParseKernels(lib)
	if err != nil {
		return usageErr("bench ops: --kernels %v", err)
	}
	if choice.Auto() || choice.Own {
		return usageErr("bench ops: --kernels %q: want a library (onednn, cudnn)", lib)
	}
	own, err := kernels.Open(*backend, kernels.Options{Threads: *threads, Kernels: kernels.KernelChoice{Own: true}})
	if err != nil {
		return err
	}
	defer own.Close()
	withLib, err := kernels.Open(*backend, kernels.Options{Threads: *threads, Kernels: choice})
	if ue := (*kernels.UnavailableError)(nil); errors.As(err, &ue) {
		// What a training run could do instead (leave the library out)
		// is no advice here: bench ops times the library.
		return usageErr("bench ops: --backend %s: %s; to use it: %s", *backend, ue.Reason, ue.Fix)
	}
	if err != nil {
		return usageErr("bench ops: --kernels %s on --backend %s: %v", lib, *backend, err)
	}
	defer withLib.Close()
	convs, _, err := model.TimeConvs(arch, own, withLib, *batch, *rounds)
	if err != nil {
		return err
	}
	norms, err := timeNorms(arch.NormShapes(), own, withLib, *batch, *rounds)
	if err != nil {
		return err
	}
	pools, err := timePools(arch.PoolShapes(), own, withLib, *batch, *rounds)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "# dml bench ops: %s, batch %d, %d thread(s), best of %d alternating rounds; dml's kernels against %s\n\n",
		*modelName, *batch, *threads, *rounds, kernels.Describe(withLib))
	printOps(stdout, convs, append(norms, pools...))
	return nil
}

// printOps prints bench ops' table: each convolution shape (GFLOP/s),
// then each memory-bound op (GB/s), and the sum over all layers.
func printOps(stdout io.Writer, convs []model.ConvTiming, moved []bytesTiming) {
	fmt.Fprintln(stdout, "| op | layers | dml ms | dml GFLOP/s | library ms | library GFLOP/s | library ÷ dml time |")
	fmt.Fprintln(stdout, "|---|---|---|---|---|---|---|")
	var ownT, libT time.Duration
	for _, t := range convs {
		n := time.Duration(len(t.Layers))
		ownT, libT = ownT+n*t.Own, libT+n*t.Lib
		fmt.Fprintf(stdout, "| conv | %s | %.3f | %.1f | %.3f | %.1f | %.2f |\n", layerList(t.Layers),
			ms(t.Own), t.FLOPs/t.Own.Seconds()/1e9, ms(t.Lib), t.FLOPs/t.Lib.Seconds()/1e9, t.Lib.Seconds()/t.Own.Seconds())
	}
	for _, t := range moved {
		n := time.Duration(len(t.layers))
		ownT, libT = ownT+n*t.own, libT+n*t.lib
		fmt.Fprintf(stdout, "| %s | %s | %.3f | %.1f GB/s | %.3f | %.1f GB/s | %.2f |\n", t.op, layerList(t.layers),
			ms(t.own), t.bytes/t.own.Seconds()/1e9, ms(t.lib), t.bytes/t.lib.Seconds()/1e9, t.lib.Seconds()/t.own.Seconds())
	}
	fmt.Fprintf(stdout, "\nall layers, once each: dml %.1f ms, library %.1f ms\n", ms(ownT), ms(libT))
}

// opsArch is bench ops' network: preset name at shape ("": the preset's
// own), or a usage error.
func opsArch(name, shapeFlag string) (model.Arch, error) {
	kind, err := trainer.ParseModel(name)
	if err != nil || !kind.IsPreset() || kind == trainer.GPT {
		return model.Arch{}, usageErr("bench ops: --model %q: want a convolutional preset network: lenet5, resnet20, vgg16, resnet50 or alexnet", name)
	}
	shape := model.Shape{C: 3, H: 32, W: 32} // the presets' CIFAR size
	if kind == trainer.LeNet5 {
		shape = model.Shape{C: 1, H: 28, W: 28}
	}
	if shapeFlag != "" {
		s, err := data.ParseShape(shapeFlag)
		if err != nil || s.T > 0 {
			return model.Arch{}, usageErr("bench ops: --shape %q: want CxHxW, e.g. 3x64x64", shapeFlag)
		}
		shape = model.Shape{C: s.C, H: s.H, W: s.W}
	}
	cfg := trainer.DefaultConfig()
	cfg.Model = kind
	arch, err := model.NewNet(shape, trainer.NetLayers(cfg, 10, shape), 10, model.SoftmaxCE)
	if err != nil {
		return model.Arch{}, usageErr("bench ops: --model %s at --shape %v: %v", name, shape, err)
	}
	return arch, nil
}

// checkOpsRange refuses bench ops' sizes and backend out of range (one
// line, exit 2), before anything is allocated.
func checkOpsRange(batch, rounds, threads int, backend string) error {
	switch {
	case batch < 1 || batch > maxBenchOpsBatch || rounds < 1:
		return usageErr("bench ops: --batch %d, --rounds %d: want a batch of 1 to %d and 1 or more rounds", batch, rounds, maxBenchOpsBatch)
	case threads < 1 || threads > maxBLASThreads:
		return usageErr("bench ops: --blas-threads %d: want 1 to %d", threads, maxBLASThreads)
	case backend != "blas" && backend != "cuda":
		return usageErr("bench ops: --backend %s: want blas or cuda (a backend with a library)", backend)
	case !slices.Contains(kernels.Names(), backend):
		return usageErr("bench ops: --backend %s: this binary has %s (the CUDA backend is in bin/dml-cuda)", backend, strings.Join(kernels.Names(), ", "))
	}
	return nil
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

// layerList names a shape's layers: the first, and how many more.
func layerList(ls []string) string {
	if len(ls) == 1 {
		return ls[0]
	}
	return fmt.Sprintf("%s (+%d alike)", ls[0], len(ls)-1)
}

// bytesTiming is a memory-bound op's best times on dml's kernels and on
// the library, and the bytes it moves (batch norm, pools).
type bytesTiming struct {
	op       string // "batchnorm", "maxpool 3s2p1 of 64×112×112"
	layers   []string
	own, lib time.Duration
	bytes    float64
}

// timeNorms times each batch-norm shape's training forward and backward
// pass on both backends, rounds alternating.
func timeNorms(shapes []model.NormShape, own, lib kernels.Backend, rows, rounds int) ([]bytesTiming, error) {
	var out []bytesTiming
	for _, s := range shapes {
		t := bytesTiming{op: "batchnorm", layers: s.Layers, bytes: float64(8 * 4 * rows * s.C * s.H * s.W)}
		var err error
		t.own, t.lib, err = alternate(rounds, own, lib, func(be kernels.Backend, _ bool) (func() (time.Duration, error), func(), error) {
			return normRun(be, rows, s.C, s.H, s.W)
		})
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// alternate readies an op on own (dml's kernels) and on lib (the
// library) with ready, runs each rounds times, alternating, and returns
// the best time of each.
func alternate(rounds int, own, lib kernels.Backend,
	ready func(be kernels.Backend, isLib bool) (run func() (time.Duration, error), free func(), err error)) (time.Duration, time.Duration, error) {
	var runs [2]func() (time.Duration, error)
	for k, be := range []kernels.Backend{own, lib} {
		run, free, err := ready(be, k == 1)
		if err != nil {
			return 0, 0, err
		}
		defer free()
		runs[k] = run
	}
	best := [2]time.Duration{1<<63 - 1, 1<<63 - 1}
	for range rounds {
		for k, run := range runs {
			d, err := run()
			if err != nil {
				return 0, 0, err
			}
			best[k] = min(best[k], d)
		}
	}
	return best[0], best[1], nil
}

// benchBufs are one op's buffers on a backend: after the first failure
// alloc makes nothing more and err keeps the failure.
type benchBufs struct {
	be   kernels.Backend
	list []kernels.Buffer
	err  error
}

// alloc makes a buffer of n elements, each v.
func (b *benchBufs) alloc(n int, v float32) kernels.Buffer {
	if b.err != nil {
		return nil
	}
	buf, err := b.be.Alloc(n)
	if err == nil {
		b.list = append(b.list, buf)
		err = b.be.Fill(buf, v)
	}
	b.err = err
	return buf
}

// then runs f unless something failed before.
func (b *benchBufs) then(f func() error) {
	if b.err == nil {
		b.err = f()
	}
}

func (b *benchBufs) free() {
	for _, buf := range b.list {
		b.be.Free(buf)
	}
}

// normRun readies one batch norm of n×c×h×w on be and returns a function
// that runs its training forward and backward pass once and times them.
// On a backend with library convolutions, its input and output gradient
// come out of one (a 3×3 "same" convolution), in the library's layout.
func normRun(be kernels.Backend, n, c, h, w int) (func() (time.Duration, error), func(), error) {
	nb, ok := kernels.NormOf(be)
	if !ok {
		return nil, nil, fmt.Errorf("backend %s has no batch norm", be.Name())
	}
	b := &benchBufs{be: be}
	big, hw := n*c*h*w, h*w
	x, y, dy, dx := b.alloc(big, 0), b.alloc(big, 0), b.alloc(big, 0.25), b.alloc(big, 0)
	g, beta, mean, inv := b.alloc(c, 1), b.alloc(c, 0), b.alloc(c, 0), b.alloc(c, 0)
	rm, rv, dg, db := b.alloc(c, 0), b.alloc(c, 1), b.alloc(c, 0), b.alloc(c, 0)
	// x varies, so that the variance is not 0.
	xs := make([]float32, big)
	for i := range xs {
		xs[i] = float32(i%7) * 0.25
	}
	b.then(func() error { return be.Upload(x, xs) })
	if whole, ok := kernels.WholeConvOf(be); ok {
		in, wt := b.alloc(big, 0), b.alloc(c*c*9, 0.01)
		b.then(func() error { return be.Copy(in, x) })
		b.then(func() error { return whole.ConvForward(x, in, wt, nil, n, c, h, w, c, 3, 1, 1) })
		b.then(func() error { return whole.ConvForward(dy, in, wt, nil, n, c, h, w, c, 3, 1, 1) })
	}
	if b.err != nil {
		b.free()
		return nil, nil, b.err
	}
	return func() (time.Duration, error) {
		t0 := time.Now()
		err := nb.BatchNormTrain(y, mean, inv, rm, rv, x, g, beta, n, c, hw, 1e-5, 0.1)
		if err == nil {
			err = nb.BatchNormGrad(dx, dg, db, dy, x, mean, inv, g, n, c, hw)
		}
		if err == nil {
			err = be.Sync()
		}
		return time.Since(t0), err
	}, b.free, nil
}
