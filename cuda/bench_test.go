//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/trainer/model"
	"github.com/dml-project/dml/trainer/trace"
)

// The GPU benchmarks. Run them with -benchtime=1x: each sub-benchmark
// measures itself (warm-up, repeats, median) once and reports metrics.
//
//	go test -tags cuda -run x -bench . -benchtime 1x ./cuda
//
// BenchmarkGemm: SGEMM GFLOP/s (2·m·n·k / time) at 1024³, 4096³ and the
// GEMMs of an MLP 784-1024-1024-10 step at batch 1024, with the transposes
// the step uses (the cases and names of bench/gpu/torch_baselines.py).
// Each case rotates among enough input sets to be ≥ 4× the L2 cache
// (at least 2), times `inner` back-to-back products between two CUDA
// events (≥ about 1 ms), and reports the median over 15 repeats. A sample
// of 256 elements of one product is checked against float64 dot products
// (max relative error, which also shows TF32 when it ran).
//
// BenchmarkMLPStep: one momentum-SGD training step of that MLP at batch
// 1024 (forward, softmax cross-entropy, backward, one Momentum over the
// fused parameters), median over blocks of 20 steps (host clock around a
// block, device synced): "device" with batches already on the GPU,
// "h2d" uploading each batch from host memory, "staged" adding the
// fused-gradient round trip of the AllReduce (one D2H into pinned memory,
// one H2D back), which is what a rank does around the ring.

const l2Bytes = 60 << 20 // H200: 60 MB (KINDS.md); a lead, not a limit

type gemmCase struct {
	name           string
	m, n, k        int
	transA, transB bool
}

func gemmCases(batch int) []gemmCase {
	b := batch
	return []gemmCase{
		{"square1024", 1024, 1024, 1024, false, false},
		{"square4096", 4096, 4096, 4096, false, false},
		{"fwdL1_x.W1T", b, 1024, 784, false, true},
		{"fwdL2_h1.W2T", b, 1024, 1024, false, true},
		{"fwdL3_h2.W3T", b, 10, 1024, false, true},
		{"dWL1_dz1T.x", 1024, 784, b, true, false},
		{"dWL2_dz2T.h1", 1024, 1024, b, true, false},
		{"dWL3_dz3T.h2", 10, 1024, b, true, false},
		{"dXL3_dz3.W3", b, 1024, 10, false, false},
		{"dXL2_dz2.W2", b, 1024, 1024, false, false},
	}
}

func randomFloats(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func BenchmarkGemm(b *testing.B) {
	for _, p := range []kernels.Precision{kernels.FP32, kernels.TF32} {
		for _, c := range gemmCases(1024) {
			for _, k := range benchKernels {
				b.Run(p.String()+"/"+c.name+"/"+k.name, func(b *testing.B) { benchGemm(b, p, c, k.k) })
			}
		}
	}
}

func benchGemm(b *testing.B, p kernels.Precision, c gemmCase, kc kernels.KernelChoice) {
	be := openBench(b, p, kc, "gemm")
	defer be.Close()
	if p == kernels.TF32 && !be.TF32() {
		b.Skip("no TF32 GEMM on this device")
	}
	m, n, k := c.m, c.n, c.k
	setBytes := 4 * (m*k + k*n + m*n)
	nsets := max(2, min(64, ceilDiv(4*l2Bytes, setBytes)))
	r := rand.New(rand.NewPCG(1, uint64(m*n*k)))
	type set struct{ a, b, c kernels.Buffer }
	sets := make([]set, nsets)
	var host0 [2][]float32
	for i := range sets {
		ha, hb := randomFloats(r, m*k), randomFloats(r, k*n)
		if i == 0 {
			host0 = [2][]float32{ha, hb}
		}
		sets[i] = set{mustLoad(b, be, ha), mustLoad(b, be, hb), mustAlloc(b, be, m*n)}
	}
	flop := 2 * float64(m) * float64(n) * float64(k)
	est := flop/30e12 + 4e-6
	inner := min(512, max(nsets, ceilDiv(int(math.Ceil(1e-3/est)), nsets)*nsets))
	run := func() {
		for i := range inner {
			s := sets[i%nsets]
			if err := be.Gemm(c.transA, c.transB, m, n, k, 1, s.a, s.b, 0, s.c); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Accuracy on a sample of C against float64.
	run()
	got := make([]float32, m*n)
	if err := be.Download(got, sets[0].c); err != nil {
		b.Fatal(err)
	}
	relErr := sampleGemmError(r, c, host0[0], host0[1], got)

	for range 3 {
		run()
	}
	times := timeEvents(b, be, 15, run)
	med := median(times) / float64(inner)
	gflops := flop / (med * 1e-3) / 1e9
	b.ReportMetric(gflops, "GFLOP/s")
	b.ReportMetric(med, "ms/gemm")
	b.ReportMetric(relErr, "max-rel-err")
	b.Logf("%s %-14s m=%d n=%d k=%d tA=%v tB=%v: %.3f ms, %.0f GFLOP/s (sets %d, inner %d, spread %.1f%%), sampled max rel err %.2g",
		p, c.name, m, n, k, c.transA, c.transB, med, gflops, nsets, inner, spread(times), relErr)
}

// sampleGemmError compares 256 random elements of C with float64 dot
// products, relative to Σ|terms|.
func sampleGemmError(r *rand.Rand, c gemmCase, a, bm, got []float32) float64 {
	worst := 0.0
	for range 256 {
		i, j := r.IntN(c.m), r.IntN(c.n)
		var s, mag float64
		for l := range c.k {
			av := a[i*c.k+l]
			if c.transA {
				av = a[l*c.m+i]
			}
			bv := bm[l*c.n+j]
			if c.transB {
				bv = bm[j*c.k+l]
			}
			s += float64(av) * float64(bv)
			mag += math.Abs(float64(av) * float64(bv))
		}
		worst = max(worst, math.Abs(float64(got[i*c.n+j])-s)/mag)
	}
	return worst
}

// timeEvents runs f reps times between two timing events each, and
// returns the milliseconds of each.
func timeEvents(b *testing.B, be *Backend, reps int, f func()) []float64 {
	start, err := be.q.newEvent(true)
	if err != nil {
		b.Fatal(err)
	}
	end, err := be.q.newEvent(true)
	if err != nil {
		b.Fatal(err)
	}
	defer be.q.destroyEvent(start)
	defer be.q.destroyEvent(end)
	var out []float64
	for range reps {
		if err := be.q.record(start); err != nil {
			b.Fatal(err)
		}
		f()
		if err := be.q.record(end); err != nil {
			b.Fatal(err)
		}
		if err := be.q.wait(end); err != nil {
			b.Fatal(err)
		}
		ms, err := be.q.elapsed(start, end)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, ms)
	}
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	return out
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread is (max − min)/median in percent.
func spread(x []float64) float64 {
	return 100 * (slices.Max(x) - slices.Min(x)) / median(x)
}

func mustAlloc(b testing.TB, be kernels.Backend, n int) kernels.Buffer {
	buf, err := be.Alloc(n)
	if err != nil {
		b.Fatal(err)
	}
	return buf
}

func mustLoad(b testing.TB, be kernels.Backend, x []float32) kernels.Buffer {
	buf := mustAlloc(b, be, len(x))
	if err := be.Upload(buf, x); err != nil {
		b.Fatal(err)
	}
	return buf
}

var benchSizes = []int{784, 1024, 1024, 10}

const benchBatch = 1024

// benchKernels are the providers the step benchmarks compare: our own
// kernels ("dml", --kernels dml) and the libraries where they load ("lib",
// --kernels auto; the sub-benchmark skips when none serves).
var benchKernels = []struct {
	name string
	k    kernels.KernelChoice
}{{"dml", kernels.KernelChoice{Own: true}}, {"lib", kernels.KernelChoice{}}}

// openBench opens the backend for a step benchmark, skipping what cannot
// run here.
func openBench(b *testing.B, p kernels.Precision, k kernels.KernelChoice, need string) *Backend {
	be := open(b, kernels.Options{Precision: p, Kernels: k})
	if k.Own && p == kernels.TF32 && !be.TF32() {
		be.Close()
		b.Skip("no TF32 GEMM on this device")
	}
	if !k.Own && (need == "gemm" && be.libs.cublas == nil || need == "conv" && be.libs.cudnn == nil) {
		be.Close()
		b.Skipf("no library serves %s here: %s", need, kernels.Describe(be))
	}
	return be
}

func BenchmarkMLPStep(b *testing.B) {
	for _, p := range []kernels.Precision{kernels.FP32, kernels.TF32} {
		for _, mode := range []string{"device", "h2d", "staged", "async"} {
			for _, k := range benchKernels {
				b.Run(fmt.Sprintf("%s/%s/%s", p, mode, k.name), func(b *testing.B) { benchMLPStep(b, p, mode, k.k) })
			}
		}
	}
}

func benchMLPStep(b *testing.B, p kernels.Precision, mode string, kc kernels.KernelChoice) {
	be := openBench(b, p, kc, "gemm")
	defer be.Close()
	const nb = 8
	in := benchSizes[0]
	x, labels := teacherData(3, nb*benchBatch, in, benchSizes[len(benchSizes)-1])
	m, err := newMLP(be, benchSizes, benchBatch, initParams(benchSizes, 5))
	if err != nil {
		b.Fatal(err)
	}
	var dx, dl []kernels.Buffer
	for i := range nb {
		dx = append(dx, mustLoad(b, be, x[i*benchBatch*in:(i+1)*benchBatch*in]))
		dl = append(dl, mustLoad(b, be, labels[i*benchBatch:(i+1)*benchBatch]))
	}
	x0, l0 := m.acts[0], m.labels
	staging, err := be.HostAlloc(paramCount(benchSizes))
	if err != nil {
		b.Fatal(err)
	}
	// async: each layer's gradient (weight, then bias: contiguous) is
	// queued for download on the copy stream as the backward pass
	// completes it, as the trainer's AllReduce step does.
	var layerOff []int
	for l, off := 0, 0; l+1 < len(benchSizes); l++ {
		layerOff = append(layerOff, off)
		off += benchSizes[l]*benchSizes[l+1] + benchSizes[l+1]
	}
	layerOff = append(layerOff, paramCount(benchSizes))
	if mode == "async" {
		m.hook = func(l int) error {
			lo, hi := layerOff[l], layerOff[l+1]
			return be.DownloadAsync(staging[lo:hi], be.View(m.grads, lo, hi-lo))
		}
	}
	step := func(i int) error {
		switch mode {
		case "h2d":
			m.acts[0], m.labels = x0, l0
			return m.step(x[(i%nb)*benchBatch*in:(i%nb+1)*benchBatch*in], labels[(i%nb)*benchBatch:(i%nb+1)*benchBatch], 0.05, 0.9)
		}
		m.acts[0], m.labels = dx[i%nb], dl[i%nb]
		if err := m.forwardBackward(); err != nil {
			return err
		}
		switch mode {
		case "staged":
			if err := be.Download(staging, m.grads); err != nil {
				return err
			}
			if err := be.Upload(m.grads, staging); err != nil {
				return err
			}
		case "async":
			if err := be.WaitDownloads(); err != nil {
				return err
			}
			if err := be.Upload(m.grads, staging); err != nil {
				return err
			}
		}
		return be.Optimize(m.params, m.grads, m.vel, optim.NewUpdate(optim.Config{Kind: optim.Momentum, LR: 0.05, Momentum: 0.9}))
	}
	const block, reps = 20, 10
	for i := range 2 * block {
		if err := step(i); err != nil {
			b.Fatal(err)
		}
	}
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	var times []float64
	for r := range reps {
		t0 := time.Now()
		for i := range block {
			if err := step(r*block + i); err != nil {
				b.Fatal(err)
			}
		}
		if err := be.Sync(); err != nil {
			b.Fatal(err)
		}
		times = append(times, float64(time.Since(t0).Microseconds())/1e3/block)
	}
	stats := make([]float32, 2)
	if err := be.Download(stats, m.stats); err != nil {
		b.Fatal(err)
	}
	if math.IsNaN(float64(stats[0])) {
		b.Fatalf("loss is NaN after %d steps", 2*block+reps*block)
	}
	med := median(times)
	b.ReportMetric(med, "ms/step")
	b.ReportMetric(benchBatch/(med*1e-3), "samples/s")
	b.Logf("%s %s %s: %.3f ms/step, %.0f samples/s (spread %.1f%%, last loss %.4f)", p, mode, kernels.Describe(be), med, benchBatch/(med*1e-3), spread(times), stats[0]/benchBatch)
}

// BenchmarkCNNStep is one training step of the CNN presets through
// trainer/model on the device (forward, loss, backward, momentum update;
// the batch already on the device): ResNet-20 at batch 128 on 3×32×32 and
// LeNet-5 at batch 1024 on 1×28×28, FP32 and TF32, the median of 10
// blocks of 10 steps. bench/gpu/torch_cnn.py times PyTorch eager with
// cuDNN on the same shapes. Variants: our kernels (dml), the libraries
// (lib), each with the forward and backward pass replayed as one CUDA
// graph (+graph; the momentum update stays op by op).
var cnnVariants = []struct {
	name  string
	k     kernels.KernelChoice
	graph bool
}{
	{"dml", kernels.KernelChoice{Own: true}, false},
	{"lib", kernels.KernelChoice{}, false},
	{"lib+graph", kernels.KernelChoice{}, true},
	{"dml+graph", kernels.KernelChoice{Own: true}, true},
}

func BenchmarkCNNStep(b *testing.B) {
	for _, c := range benchCNNs {
		for _, p := range []kernels.Precision{kernels.FP32, kernels.TF32, kernels.BF16} {
			for _, k := range cnnVariants {
				b.Run(fmt.Sprintf("%s/%s/%s", c.name, p, k.name), func(b *testing.B) {
					be := openBench(b, p, k.k, "conv")
					defer be.Close()
					cr, free := cnnBenchRun(b, be, c)
					defer free()
					cr.m.UseGraph = k.graph
					times := blockTimes(b, be, func() error { return cr.step(c.rows) })
					med := median(times)
					b.ReportMetric(med, "ms/step")
					b.ReportMetric(float64(c.rows)/(med*1e-3), "samples/s")
					b.ReportMetric(float64(c.rows)*float64(cr.m.Arch.TrainFLOPs())/(med*1e-3)/1e9, "GFLOP/s")
					b.Logf("%s %s batch %d, %s%s: %.3f ms/step (spread %.1f%%)", c.name, p, c.rows, kernels.Describe(be), map[bool]string{true: ", CUDA graph"}[cr.m.UseGraph], med, spread(times))
				})
			}
		}
	}
}

// BenchmarkCNNProfile is where a CNN step's time goes, op by op: the step
// of BenchmarkCNNStep with the libraries (fp32), every op waiting for the
// device (as DML_CUDA_SYNC=1) inside a traced backend, so that each op's
// span is its device time plus a wait (about 10 µs). It logs the ops and
// layers by total time per step.
func BenchmarkCNNProfile(b *testing.B) {
	for _, c := range benchCNNs {
		for _, k := range benchKernels {
			b.Run(c.name+"/"+k.name, func(b *testing.B) {
				be := open(b, kernels.Options{Kernels: k.k})
				defer be.Close()
				be.syncEach = true
				rec := trace.NewRecorder(trace.Options{})
				tb := trace.Backend(be, rec)
				cr, free := cnnBenchRun(b, tb, c)
				defer free()
				cr.m.Tracer = rec
				for range 2 {
					if err := cr.step(c.rows); err != nil {
						b.Fatal(err)
					}
				}
				const steps = 5
				start := time.Now()
				for range steps {
					if err := cr.step(c.rows); err != nil {
						b.Fatal(err)
					}
				}
				type agg struct {
					name  string
					n     int
					total time.Duration
				}
				by := map[string]*agg{}
				for _, s := range rec.Snapshot().Spans {
					if s.Start.Before(start) {
						continue
					}
					a := by[s.Name]
					if a == nil {
						a = &agg{name: s.Name}
						by[s.Name] = a
					}
					a.n++
					a.total += s.Duration()
				}
				var all []*agg
				for _, a := range by {
					all = append(all, a)
				}
				slices.SortFunc(all, func(x, y *agg) int { return int(y.total - x.total) })
				b.Logf("%s %s, every op synced: %.3f ms/step", c.name, kernels.Describe(be), float64(time.Since(start).Microseconds())/1e3/steps)
				for _, a := range all[:min(len(all), 40)] {
					b.Logf("  %-28s %5d calls/step %8.3f ms/step", a.name, a.n/steps, float64(a.total.Microseconds())/1e3/steps)
				}
			})
		}
	}
}

// BenchmarkCNNKernels runs three CNN steps with the libraries inside the
// profiler's range and nothing else there, for Nsight Compute's per-kernel
// device times:
//
//	ncu --clock-control none --profile-from-start off --csv \
//	    --metrics gpu__time_duration.sum cuda.test -test.run x \
//	    -test.bench 'CNNKernels/lenet5/fp32' -test.benchtime 1x
//
// (bench/gpu/step-run.sh sums them by kernel). Without a profiler it is
// three steps.
func BenchmarkCNNKernels(b *testing.B) {
	for _, c := range benchCNNs {
		for _, p := range []kernels.Precision{kernels.FP32, kernels.TF32, kernels.BF16} {
			b.Run(fmt.Sprintf("%s/%s", c.name, p), func(b *testing.B) {
				be := openBench(b, p, kernels.KernelChoice{}, "conv")
				defer be.Close()
				cr, free := cnnBenchRun(b, be, c)
				defer free()
				profileSteps(b, be, func() error { return cr.step(c.rows) })
				b.Logf("%s %s batch %d, %s: 3 steps in the profiler's range", c.name, p, c.rows, kernels.Describe(be))
			})
		}
	}
}

// gptCase is the default `dml train --model gpt` (nanoGPT's shape: 4
// layers, 4 heads, 128 wide, 128 tokens, vocabulary 256) at batch 64, as
// bench/gpu/torch_gpt.py runs PyTorch's.
var gptCase = cnnCase{"gpt", model.Shape{C: 1, H: 1, W: 1, T: 128},
	model.GPT(model.GPTConfig{Layers: 4, Heads: 4, Embed: 128, SeqLen: 128}, 256), 64}

// gptRun is gptCase on be (momentum SGD, as the CNN runs) with a batch of
// random tokens uploaded.
func gptRun(b *testing.B, be kernels.Backend) (cnnRun, func()) {
	arch, err := model.NewNet(gptCase.in, gptCase.layers, 256, model.TokenCE)
	if err != nil {
		b.Fatal(err)
	}
	cr, free := newCNNRun(b, be, arch, gptCase, arch.InitParams(1))
	r := rand.New(rand.NewPCG(1, 2))
	batch := make([]float32, 2*gptCase.rows*gptCase.in.T)
	for i := range batch {
		batch[i] = float32(r.IntN(256))
	}
	if err := cr.m.Upload(batch, gptCase.rows); err != nil {
		free()
		b.Fatal(err)
	}
	return cr, free
}

// BenchmarkGPTStep is one GPT training step (gptCase; the batch on the
// device), the median of 10 blocks of 10 steps: our kernels, the
// libraries, each op by op and as a CUDA graph.
func BenchmarkGPTStep(b *testing.B) {
	for _, k := range cnnVariants {
		b.Run(k.name, func(b *testing.B) {
			be := openBench(b, kernels.FP32, k.k, "gemm")
			defer be.Close()
			cr, free := gptRun(b, be)
			defer free()
			cr.m.UseGraph = k.graph
			times := blockTimes(b, be, func() error { return cr.step(gptCase.rows) })
			med := median(times)
			tokens := float64(gptCase.rows * gptCase.in.T)
			b.ReportMetric(med, "ms/step")
			b.ReportMetric(tokens/(med*1e-3), "tokens/s")
			b.Logf("gpt batch %d×%d, %s%s: %.3f ms/step, %.0f tokens/s (spread %.1f%%)", gptCase.rows, gptCase.in.T, kernels.Describe(be),
				map[bool]string{true: ", CUDA graph"}[cr.m.UseGraph], med, tokens/(med*1e-3), spread(times))
		})
	}
}

// BenchmarkGPTKernels is BenchmarkCNNKernels for gptCase with the
// libraries: three steps inside the profiler's range.
func BenchmarkGPTKernels(b *testing.B) {
	be := openBench(b, kernels.FP32, kernels.KernelChoice{}, "gemm")
	defer be.Close()
	cr, free := gptRun(b, be)
	defer free()
	profileSteps(b, be, func() error { return cr.step(gptCase.rows) })
	b.Logf("gpt batch %d, %s: 3 steps in the profiler's range", gptCase.rows, kernels.Describe(be))
}

// profileSteps runs step three times to warm up, then three times inside
// the profiler's range, the device idle at both ends.
func profileSteps(b *testing.B, be *Backend, step func() error) {
	for i := range 6 {
		if i == 3 {
			if err := be.Sync(); err != nil {
				b.Fatal(err)
			}
			if err := be.q.profileRange(true); err != nil {
				b.Fatal(err)
			}
		}
		if err := step(); err != nil {
			b.Fatal(err)
		}
	}
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := be.q.profileRange(false); err != nil {
		b.Fatal(err)
	}
}

// benchCNNs are the CNN step benchmarks' cases: ResNet-20 at batch 128
// and LeNet-5 at batch 1024, or those DML_BENCH_CNNS names
// (comma-separated, from allBenchCNNs: ResNet-50 on 3×224×224 at batch
// 64, VGG-16 and AlexNet on 3×32×32 at batch 128, as
// bench/gpu/torch_cnn.py --models times them).
var benchCNNs = pickBenchCNNs(os.Getenv("DML_BENCH_CNNS"))

var allBenchCNNs = func() []cnnCase {
	cifar, imagenet := model.Shape{C: 3, H: 32, W: 32}, model.Shape{C: 3, H: 224, W: 224}
	return []cnnCase{
		{"resnet20", cifar, model.ResNet20(10), 128},
		{"lenet5", model.Shape{C: 1, H: 28, W: 28}, model.LeNet5(10), 1024},
		{"resnet50", imagenet, model.ResNet50(10, imagenet), 64},
		{"vgg16", cifar, model.VGG16(10, cifar), 128},
		{"alexnet", cifar, model.AlexNet(10), 128},
	}
}()

// pickBenchCNNs is the cases names lists ("": resnet20 and lenet5); a
// name no case has panics, naming them (a benchmark's setting, read once).
func pickBenchCNNs(names string) []cnnCase {
	if names == "" {
		names = "resnet20,lenet5"
	}
	var cs []cnnCase
	for _, n := range strings.Split(names, ",") {
		i := slices.IndexFunc(allBenchCNNs, func(c cnnCase) bool { return c.name == n })
		if i < 0 {
			panic(fmt.Sprintf("DML_BENCH_CNNS: no case %q (resnet20, lenet5, resnet50, vgg16, alexnet)", n))
		}
		cs = append(cs, allBenchCNNs[i])
	}
	return cs
}

// cnnBenchRun is case c on be (cnnRun, weights from seed 1) with a batch
// of random pixels uploaded, as every CNN benchmark steps it.
func cnnBenchRun(b *testing.B, be kernels.Backend, c cnnCase) (cnnRun, func()) {
	arch, err := model.NewNet(c.in, c.layers, 10, model.SoftmaxCE)
	if err != nil {
		b.Fatal(err)
	}
	cr, free := newCNNRun(b, be, arch, c, arch.InitParams(1))
	batch := randomBatch(rand.New(rand.NewPCG(1, 2)), c.in, c.rows, func(i int) int { return i % 10 })
	if err := cr.m.Upload(batch, c.rows); err != nil {
		free()
		b.Fatal(err)
	}
	return cr, free
}

// blockTimes runs step in 11 blocks of 10, waiting for the device at the
// end of each, and returns the ms per step of the last 10 blocks (the
// first warms up: module loads, pools).
func blockTimes(b *testing.B, be *Backend, step func() error) []float64 {
	const block, reps = 10, 10
	var times []float64
	for r := range reps + 1 {
		t0 := time.Now()
		for range block {
			if err := step(); err != nil {
				b.Fatal(err)
			}
		}
		if err := be.Sync(); err != nil {
			b.Fatal(err)
		}
		if r > 0 {
			times = append(times, float64(time.Since(t0).Microseconds())/1e3/block)
		}
	}
	return times
}
