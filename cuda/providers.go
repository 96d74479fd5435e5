//go:build cuda

package cuda

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"unsafe"

	"github.com/dml-project/dml/kernels"
)

// The libraries a backend uses (libs.go loads them): which serve, their
// handles on the backend's stream, and what the convolutions planned.
//
// Reproducibility: with --kernels dml every op is our own and a run
// gives the bits it always gave. With the libraries, cuBLAS gives the
// same bits run to run on one GPU model (its documented guarantee, our
// workspace set so that no stream-dependent split happens). cuDNN's
// convolution algorithms are chosen once per shape and direction, by
// DML_CUDNN_ALGO:
//   - find (the default): cuDNN times its candidates on the first call
//     (PyTorch's cudnn.benchmark) and the deterministic ones within 10%
//     of the fastest deterministic one are taken, the lowest-numbered
//     first, so that timing noise seldom changes the choice; a run is
//     deterministic once its algorithms are chosen, but two runs may
//     choose differently, and then differ in the last bits;
//   - heuristic: cuDNN's heuristics choose (shape and machine only, no
//     timing): runs are deterministic run to run, sometimes slower
//     (LeNet-5's filter gradients);
//   - fastest: the fastest of all, non-deterministic algorithms (atomic
//     adds) included: the bits may differ step to step.
type providers struct {
	cublas, cudnn *lib // serving; nil: our kernels
	blas, dnn     unsafe.Pointer
	blasWS        *allocation
	convMath      int
	find, anyAlgo bool
	filterRoute   filterRoute // the filter gradient: cuDNN's, cuBLAS's products, or the faster per shape
	debug         bool        // DML_CUDNN_DEBUG=1: each algorithm chosen, on stderr
	bnMode        int         // cuDNN's batch-norm mode for training and its gradient; 0: ours serve batch norm
	plans         map[convShape]*convPlan
	bns           map[[3]int]bnDesc
	bnEps         float64 // the eps of the last BatchNormTrain, for its gradient
}

// blasWorkspace is cuBLAS's workspace (NVIDIA's advice for Hopper: 32 MiB).
const blasWorkspace = 32 << 20

// maxConvWorkspace bounds the workspace of a cuDNN algorithm.
const maxConvWorkspace = 256 << 20

// convShape is a convolution's dimensions.
type convShape struct{ n, c, h, w, o, k, stride, pad int }

func (s convShape) out() (int, int) { return kernels.ConvOut(s.h, s.w, s.k, s.stride, s.pad) }

// convPlan is a shape's descriptors and, per direction, the algorithm
// chosen and its workspace (planned on first use).
type convPlan struct {
	desc    convDesc
	planned [3]bool
	algo    [3]int
	ws      [3]int
	ms      [3]float64 // the chosen algorithm's time in cuDNN's search (0: not timed)
	// filterGemm is the filter gradient's route for this shape once
	// chosen: 1 cuBLAS's products (filterByGemm), -1 cuDNN's; 0 not yet.
	filterGemm int8
}

// openProviders loads the libraries --kernels allows and makes their
// handles. A forced library that cannot serve is an UnavailableError; an
// auto one that cannot is a notice (one line) and our kernels serve.
func (be *Backend) openProviders(o kernels.Options) error {
	be.libs = providers{plans: map[convShape]*convPlan{}, bns: map[[3]int]bnDesc{}, bnEps: 1e-5,
		convMath: cudnnFMAMath, debug: os.Getenv("DML_CUDNN_DEBUG") == "1"}
	algo, err := envSetting("DML_CUDNN_ALGO", "find", "heuristic", "fastest")
	if err != nil {
		return err
	}
	be.libs.find, be.libs.anyAlgo = algo != 1, algo == 2
	// Batch norm: ours unless DML_CUDNN_BN asks for cuDNN's. cuDNN's
	// NCHW spatial batch norm reduces a channel per block, like our first
	// kernels did: ResNet-20's 16-channel layers then use 16 of an H100's
	// 132 multiprocessors (ResNet-20's step at batch 128: 6.99 ms with it,
	// 6.21 with ours split over slices, 7.22 with its persistent mode;
	// bench/gpu/results, 2026-11-27, call 4).
	bn, err := envSetting("DML_CUDNN_BN", "off", "spatial", "persistent")
	if err != nil {
		return err
	}
	be.libs.bnMode = [...]int{0, cudnnBNSpatial, cudnnBNPersistent}[bn]
	if o.Kernels.Own {
		return nil
	}
	tf32 := (o.Precision == kernels.TF32 || o.Precision.Rounds()) && 10*be.dev.Major+be.dev.Minor >= 80
	if tf32 {
		be.libs.convMath = cudnnDefaultMath
	}
	// The filter gradient: cuDNN's, or cuBLAS products (filterByGemm),
	// by DML_CUDNN_WGRAD (auto: see filterRoute).
	route, err := envSetting("DML_CUDNN_WGRAD", "auto", "gemm", "cudnn")
	if err != nil {
		return err
	}
	be.libs.filterRoute = filterRoute(route) // in envSetting's order
	cublas, cudnn := loadLibs()
	var notes []string
	use := func(l *lib, start func() error) error {
		if !o.Kernels.Wants(l.name) {
			return nil
		}
		err := l.err
		if err == nil {
			err = start()
		}
		note, err := libVerdict(o.Kernels, l.name, err)
		if note != "" {
			notes = append(notes, note)
		}
		return err
	}
	if err := use(cublas, func() error {
		ws, err := be.allocate(blasWorkspace)
		if err != nil {
			return err
		}
		math := cublasDefaultMath
		if tf32 {
			math = cublasTF32Math
		}
		h, err := blasCreate(be.q, math, ws.ptr, blasWorkspace)
		if err != nil {
			be.release(ws)
			return err
		}
		be.libs.blas, be.libs.blasWS, be.libs.cublas = h, ws, cublas
		return nil
	}); err != nil {
		be.closeProviders()
		return err
	}
	if err := use(cudnn, func() error {
		h, err := dnnCreate(be.q)
		if err != nil {
			return err
		}
		be.libs.dnn, be.libs.cudnn = h, cudnn
		return nil
	}); err != nil {
		be.closeProviders()
		return err
	}
	if len(notes) > 0 && o.Notice != nil {
		o.Notice("dml: cuda: " + strings.Join(notes, "; ") + "; dml's own kernels serve those ops")
	}
	return nil
}

// libVerdict is what becomes of a library that failed to load or start
// (err; nil: it serves): under auto a note for the notice line, forced by
// --kernels an UnavailableError (one line, exit 2 in the command).
func libVerdict(k kernels.KernelChoice, name string, err error) (note string, _ error) {
	if err == nil {
		return "", nil
	}
	if k.Forced(name) {
		return "", &kernels.UnavailableError{Backend: "cuda", Reason: fmt.Sprintf("--kernels %s: %s did not load: %v", k, name, err),
			Fix: "install it, put its folder in DML_CUDA_LIBS or LD_LIBRARY_PATH", Else: "or use --kernels auto or dml"}
	}
	return fmt.Sprintf("%s not used (%v)", name, err), nil
}

// closeProviders releases the handles and descriptors (before the stream
// and the memory go).
func (be *Backend) closeProviders() {
	p := &be.libs
	blasDestroy(be.q, p.blas)
	dnnDestroy(be.q, p.dnn)
	for _, pl := range p.plans {
		pl.desc.free()
	}
	for _, d := range p.bns {
		d.free()
	}
	if p.blasWS != nil {
		be.release(p.blasWS)
	}
	*p = providers{}
}

// Providers: see kernels.ProviderReporter.
func (be *Backend) Providers() []kernels.Provided {
	var out []kernels.Provided
	if l := be.libs.cublas; l != nil {
		out = append(out, kernels.Provided{Ops: "gemm", Provider: l.provider()})
	}
	if l := be.libs.cudnn; l != nil {
		conv := l.provider()
		switch {
		case be.libs.anyAlgo:
			conv += " fastest"
		case !be.libs.find:
			conv += " heuristic"
		}
		if be.libs.cublas != nil {
			switch {
			case be.libs.filterRoute == filterByCublas:
				conv += " (filter gradient: cublas)"
			case be.libs.filterRoute == filterAuto && be.libs.find:
				conv += " (filter gradient: cudnn or cublas, timed)"
			case be.libs.filterRoute == filterAuto && be.libs.convMath == cudnnFMAMath:
				conv += " (filter gradient: cublas)"
			}
		}
		out = append(out, kernels.Provided{Ops: "conv", Provider: conv})
		if be.libs.bnMode != 0 {
			out = append(out, kernels.Provided{Ops: "batchnorm", Provider: l.provider()})
		}
	}
	return append(out, kernels.Provided{Ops: "rest", Provider: "dml"})
}

// WholeConv: see kernels.WholeConvOps (true where cuDNN serves).
func (be *Backend) WholeConv() bool { return be.libs.cudnn != nil }

var _ kernels.WholeConvOps = (*Backend)(nil)

// plan returns the shape's descriptors with direction dir's algorithm
// chosen (the buffers are those of the call, for a timed search).
func (be *Backend) plan(s convShape, dir int, x, w, y devPtr) (*convPlan, error) {
	p := be.libs.plans[s]
	if p == nil {
		d, err := newConvDesc(s, be.libs.convMath)
		if err != nil {
			return nil, err
		}
		p = &convPlan{desc: d}
		be.libs.plans[s] = p
	}
	if p.planned[dir] {
		return p, nil
	}
	// The timed search runs the candidates, in a workspace as large as
	// any algorithm may take.
	var wsPtr devPtr
	wsBytes := 0
	if be.libs.find {
		ws, err := be.allocate(maxConvWorkspace)
		if err != nil {
			return nil, err
		}
		defer be.release(ws)
		wsPtr, wsBytes = ws.ptr, maxConvWorkspace
	}
	perf, err := p.desc.algos(be.q, be.libs.dnn, dir, be.libs.find, x, w, y, wsPtr, wsBytes)
	if err != nil {
		return nil, err
	}
	if !be.libs.anyAlgo {
		perf = sumsOfProducts(perf, dir, be.libs.convMath == cudnnFMAMath)
	}
	best := pickAlgo(perf, be.libs.find, be.libs.anyAlgo)
	if best < 0 {
		return nil, fmt.Errorf("cudnn offers no algorithm for this convolution within %d MiB of workspace", maxConvWorkspace>>20)
	}
	p.algo[dir], p.ws[dir], p.ms[dir], p.planned[dir] = perf[best].algo, perf[best].memory, float64(perf[best].ms), true
	if be.libs.debug {
		fmt.Fprintf(os.Stderr, "dml: cudnn %v %s: algorithm %d (%.3f ms, %d bytes of workspace, math %d, deterministic %v) of %d\n",
			s, [3]string{"forward", "data gradient", "filter gradient"}[dir], perf[best].algo, perf[best].ms, perf[best].memory, perf[best].math, perf[best].deterministic, len(perf))
	}
	return p, nil
}

// approximate lists, per direction, the cuDNN algorithms that transform
// the problem (FFT, FFT with tiling, Winograd, non-fused Winograd): their
// rounding grows with the transform, to TF32's size on LeNet-5's 5×5
// data gradients (measured on an H100: 4e-4 to 1.5e-3 of the sum of
// magnitudes, against fp32's 1e-6).
var approximate = [3][]int{{4, 5, 6, 7}, {2, 3, 4, 5}, {2, 4, 5, 6}}

// sumsOfProducts keeps the algorithms that compute a convolution as sums
// of products (implicit or explicit GEMM, direct), and with fma only those
// in FMA math: --precision fp32 means float32's accuracy, and bf16 and
// fp16 mean exact products of the rounded operands (which TF32 tensor
// cores give) summed in float32 — a transform's rounding is neither
// (TestConformancePrecision/fp16/WholeConv failed on LeNet-5's 5×5 data
// gradient under a transform, H200, 2026-11-27). DML_CUDNN_ALGO=fastest
// allows them all.
func sumsOfProducts(perf []algoPerf, dir int, fma bool) []algoPerf {
	var out []algoPerf
	for _, a := range perf {
		if !slices.Contains(approximate[dir], a.algo) && (!fma || a.math == cudnnFMAMath || a.math == cudnnDefaultMath) {
			out = append(out, a)
		}
	}
	return out
}

// pickAlgo chooses among cuDNN's answer (best first): a usable algorithm
// (status 0, workspace within maxConvWorkspace), deterministic unless
// anyAlgo, the first one for heuristics; for timed results, of those
// within 10% of the fastest, the lowest-numbered. -1: none.
func pickAlgo(perf []algoPerf, timed, anyAlgo bool) int {
	best, fastest := -1, float32(0)
	for i, a := range perf {
		if a.status != 0 || a.memory > maxConvWorkspace || !anyAlgo && !a.deterministic {
			continue
		}
		if best < 0 {
			best, fastest = i, a.ms
			if !timed {
				break
			}
			continue
		}
		if a.ms <= 1.1*fastest && a.algo < perf[best].algo {
			best = i
		}
	}
	if best < 0 && !anyAlgo { // no deterministic one: take any usable
		return pickAlgo(perf, timed, true)
	}
	return best
}

// conv runs one direction of a whole convolution through cuDNN.
func (be *Backend) conv(op string, s convShape, dir int, x, w, y, bias devPtr) error {
	dims := []int{s.n, s.c, s.h, s.w, s.o, s.k, s.stride, s.pad}
	p, err := be.plan(s, dir, x, w, y)
	if err != nil {
		return be.deviceErr(op, dimsString(dims), err)
	}
	var ws devPtr
	if p.ws[dir] > 0 {
		a, err := be.scratch(op, (p.ws[dir]+3)/4, dims...)
		if err != nil {
			return err
		}
		defer be.release(a)
		ws = a.ptr
	}
	return be.done(op, p.desc.run(be.q, be.libs.dnn, dir, p.algo[dir], x, w, y, bias, ws, p.ws[dir]), dims...)
}

// wholeCheck checks a whole convolution's arguments.
func (be *Backend) wholeCheck(op string, yLen, xLen, wLen, bLen, n, c, h, w, o, k, stride, pad int) error {
	if err := be.usable(op); err != nil {
		return err
	}
	if be.libs.cudnn == nil {
		return be.shapeErr(op, "cuDNN does not serve this backend (WholeConv is false)")
	}
	if err := kernels.CheckWholeConv("cuda."+op, yLen, xLen, wLen, bLen, n, c, h, w, o, k, stride, pad); err != nil {
		return err
	}
	if n > maxInt32 || c*h*w > maxInt32 || o*c*k*k > maxInt32 {
		return be.shapeErr(op, "n %d, %d→%d channels of %d×%d: too large for cuDNN's 32-bit dimensions", n, c, o, h, w)
	}
	return nil
}

const maxInt32 = 1<<31 - 1

// optBuf is an optional buffer's address and length (0 and -1 for none).
func (be *Backend) optBuf(b kernels.Buffer) (devPtr, int) {
	if b == nil {
		return 0, -1
	}
	d := be.buf(b)
	return d.ptr, d.n
}

// ConvForward: see kernels.WholeConvOps.
func (be *Backend) ConvForward(y, x, w, bias kernels.Buffer, n, c, h, wd, o, k, stride, pad int) error {
	const op = "ConvForward"
	yd, xd, wdd := be.buf(y), be.buf(x), be.buf(w)
	bp, bl := be.optBuf(bias)
	if err := be.wholeCheck(op, yd.n, xd.n, wdd.n, bl, n, c, h, wd, o, k, stride, pad); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	xp, wp, err := be.rounded2(op, xd, wdd)
	if err != nil {
		return err
	}
	return be.conv(op, convShape{n, c, h, wd, o, k, stride, pad}, dirForward, xp, wp, yd.ptr, bp)
}

// ConvBackwardData: see kernels.WholeConvOps.
func (be *Backend) ConvBackwardData(dx, dy, w kernels.Buffer, n, c, h, wd, o, k, stride, pad int) error {
	const op = "ConvBackwardData"
	xd, yd, wdd := be.buf(dx), be.buf(dy), be.buf(w)
	if err := be.wholeCheck(op, yd.n, xd.n, wdd.n, -1, n, c, h, wd, o, k, stride, pad); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	yp, wp, err := be.rounded2(op, yd, wdd)
	if err != nil {
		return err
	}
	return be.conv(op, convShape{n, c, h, wd, o, k, stride, pad}, dirData, xd.ptr, wp, yp, 0)
}

// ConvBackwardFilter: see kernels.WholeConvOps. An empty batch gives zero
// gradients.
func (be *Backend) ConvBackwardFilter(dw, db, x, dy kernels.Buffer, n, c, h, wd, o, k, stride, pad int) error {
	const op = "ConvBackwardFilter"
	wdd, xd, yd := be.buf(dw), be.buf(x), be.buf(dy)
	bp, bl := be.optBuf(db)
	if err := be.wholeCheck(op, yd.n, xd.n, wdd.n, bl, n, c, h, wd, o, k, stride, pad); err != nil {
		return err
	}
	if n == 0 {
		if err := be.Fill(dw, 0); err != nil || db == nil {
			return err
		}
		return be.Fill(db, 0)
	}
	xp, yp, err := be.rounded2(op, xd, yd)
	if err != nil {
		return err
	}
	sh := convShape{n, c, h, wd, o, k, stride, pad}
	gemm, err := be.filterByCublas(op, sh, wdd.ptr, xp, yp)
	if err != nil {
		return err
	}
	if gemm {
		err = be.filterByGemm(op, sh, wdd.ptr, xp, yp)
	} else {
		err = be.conv(op, sh, dirFilter, xp, wdd.ptr, yp, 0)
	}
	if err != nil || db == nil {
		return err
	}
	oh, ow := kernels.ConvOut(h, wd, k, stride, pad)
	return be.biasGrad(op, bp, yp, n, o, oh*ow)
}

// envSetting is the index among choices of environment variable name's
// value (unset: 0, the first); another value is an UnavailableError
// naming the choices.
func envSetting(name string, choices ...string) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	if i := slices.Index(choices, v); i >= 0 {
		return i, nil
	}
	list := strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
	return 0, &kernels.UnavailableError{Backend: "cuda", Reason: fmt.Sprintf("%s=%q is not %s", name, v, list),
		Fix: fmt.Sprintf("set %s to one of those, or unset it", name)}
}

// filterRoute is DML_CUDNN_WGRAD: how the filter gradient is computed
// where both libraries serve.
type filterRoute int

const (
	// filterAuto: under a timed choice (DML_CUDNN_ALGO find or fastest)
	// both routes run on the shape's first call and the faster serves
	// for the run; under heuristic, cuBLAS's in FMA math (cuDNN's
	// deterministic filter gradient there is its slowest algorithm),
	// cuDNN's otherwise.
	filterAuto filterRoute = iota
	filterByCublas
	filterByCudnn
)

// filterByCublas reports whether shape s's filter gradient takes cuBLAS's
// products, choosing on the shape's first call (timing both routes on
// the call's own buffers, where the choice is timed).
func (be *Backend) filterByCublas(op string, s convShape, dw, x, dy devPtr) (bool, error) {
	if be.libs.blas == nil || be.libs.filterRoute == filterByCudnn {
		return false, nil
	}
	if be.libs.filterRoute == filterByCublas {
		return true, nil
	}
	if !be.libs.find {
		return be.libs.convMath == cudnnFMAMath, nil
	}
	p, err := be.plan(s, dirFilter, x, dw, dy)
	if err != nil {
		return false, be.deviceErr(op, dimsString([]int{s.n, s.c, s.h, s.w, s.o, s.k, s.stride, s.pad}), err)
	}
	if p.filterGemm == 0 {
		cudnnMs := p.ms[dirFilter]
		gemmMs, err := be.timeFilterGemm(op, s, dw, x, dy)
		if err != nil {
			return false, err
		}
		p.filterGemm = -1
		if fasterGemm(cudnnMs, gemmMs) {
			p.filterGemm = 1
		}
		if be.libs.debug {
			fmt.Fprintf(os.Stderr, "dml: cudnn %v filter gradient: cudnn's algorithm %d %.3f ms, cublas products %.3f ms: %s\n",
				s, p.algo[dirFilter], cudnnMs, gemmMs, map[bool]string{true: "cublas", false: "cudnn"}[p.filterGemm == 1])
		}
	}
	return p.filterGemm == 1, nil
}

// fasterGemm is the timed choice: cuBLAS's products unless cuDNN's
// algorithm took at most as long (a tie keeps cuDNN's, the library made
// for it); a time that could not be taken (≤ 0) loses.
func fasterGemm(cudnnMs, gemmMs float64) bool {
	return gemmMs > 0 && (cudnnMs <= 0 || gemmMs < cudnnMs)
}

// timeFilterGemm runs filterByGemm twice on the call's buffers and returns
// the second run's device time (the first takes its scratch from the
// pool, and cuBLAS picks its kernels).
func (be *Backend) timeFilterGemm(op string, s convShape, dw, x, dy devPtr) (float64, error) {
	start, err := be.q.newEvent(true)
	if err != nil {
		return 0, be.deviceErr(op, "timing", err)
	}
	defer be.q.destroyEvent(start)
	end, err := be.q.newEvent(true)
	if err != nil {
		return 0, be.deviceErr(op, "timing", err)
	}
	defer be.q.destroyEvent(end)
	if err := be.filterByGemm(op, s, dw, x, dy); err != nil {
		return 0, err
	}
	if err := be.q.record(start); err != nil {
		return 0, be.deviceErr(op, "timing", err)
	}
	if err := be.filterByGemm(op, s, dw, x, dy); err != nil {
		return 0, err
	}
	if err := be.q.record(end); err != nil {
		return 0, be.deviceErr(op, "timing", err)
	}
	if err := be.q.wait(end); err != nil {
		return 0, be.deviceErr(op, "timing", err)
	}
	ms, err := be.q.elapsed(start, end)
	if err != nil {
		return 0, be.deviceErr(op, "timing", err)
	}
	return ms, nil
}

// filterGemmFloats bounds the columns filterByGemm makes at once (128
// MiB); a larger batch is taken in chunks of samples.
const filterGemmFloats = 1 << 25

// filterByGemm queues the filter gradient as cuBLAS products, which are
// deterministic and, on the small-channel layers of ResNet-20 and LeNet-5,
// several times faster than cuDNN's deterministic filter-gradient
// algorithm in FMA math (0.39 ms against 0.11 for the atomic one on a
// 16-channel 3×3 layer at batch 128, 0.9 and 2.0 ms on LeNet-5's two
// layers at batch 1024; H100, 2026-11-27): per chunk of nb samples, the
// columns (dml_im2col: c·k·k × nb·oh·ow), dy channel-major
// (dml_transpose01: o × nb·oh·ow), and dW (o × c·k·k) += dyᵀ·colsᵀ, a
// product of depth nb·oh·ow. The chunks add in order: the same bits every
// run.
func (be *Backend) filterByGemm(op string, s convShape, dw, x, dy devPtr) error {
	oh, ow := kernels.ConvOut(s.h, s.w, s.k, s.stride, s.pad)
	p, ck := oh*ow, s.c*s.k*s.k
	dims := []int{s.n, s.c, s.h, s.w, s.o, s.k, s.stride, s.pad}
	nb := max(1, min(s.n, filterGemmFloats/max(1, ck*p)))
	if nb*p > maxInt32 {
		nb = max(1, maxInt32/p)
	}
	cols, err := be.scratch(op, ck*nb*p, dims...)
	if err != nil {
		return err
	}
	defer be.release(cols)
	dyT, err := be.scratch(op, s.o*nb*p, dims...)
	if err != nil {
		return err
	}
	defer be.release(dyT)
	kk := &be.dev.k
	for s0 := 0; s0 < s.n; s0 += nb {
		m := min(nb, s.n-s0)
		xs, ys := x+uint64(4*s0*s.c*s.h*s.w), dy+uint64(4*s0*s.o*p)
		if err := be.im2col(cols.ptr, xs, m, s.c, s.h, s.w, s.k, s.stride, s.pad); err != nil {
			return be.deviceErr(op, dimsString(dims), err)
		}
		if err := be.launch1D(kk.transpose01, s.o*m*p, ptrAt(dyT.ptr), ptrAt(ys), i64(m), i64(s.o), i64(p)); err != nil {
			return be.deviceErr(op, dimsString(dims), err)
		}
		// Row-major dW (o × ck) = dyT (o × m·p) · colsᵀ, as column-major
		// dWᵀ = cols'ᵀ·dyT': the operands swap (see Gemm).
		beta := float32(1)
		if s0 == 0 {
			beta = 0
		}
		if err := blasSgemm(be.q, be.libs.blas, true, false, ck, s.o, m*p, 1, cols.ptr, m*p, dyT.ptr, m*p, beta, dw, ck); err != nil {
			return be.deviceErr(op, dimsString(dims), err)
		}
	}
	return be.record(op, dims...)
}

// bnServes reports whether cuDNN runs a batch norm of this shape: it
// needs at least two values per channel (our kernels define the running
// variance of one as its biased variance, cuDNN divides by zero) and an
// eps of at least 1e-5 (cuDNN's CUDNN_BN_MIN_EPSILON).
func (be *Backend) bnServes(n, c, hw int, eps float64) bool {
	return be.libs.cudnn != nil && be.libs.bnMode != 0 && n*hw >= 2 && eps >= 1e-5 && n <= maxInt32 && c*hw <= maxInt32
}

// bnDescFor returns the cached descriptors of an n×c×hw batch norm.
func (be *Backend) bnDescFor(n, c, hw int) (bnDesc, error) {
	key := [3]int{n, c, hw}
	if d, ok := be.libs.bns[key]; ok {
		return d, nil
	}
	d, err := newBNDesc(n, c, hw)
	if err != nil {
		return bnDesc{}, err
	}
	be.libs.bns[key] = d
	return d, nil
}
