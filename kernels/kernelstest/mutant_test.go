package kernelstest_test

import (
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/kernels/kernelstest"
	"github.com/dml-project/dml/kernels/optim"
)

// The suite is only worth running if it can fail. Each mutant below is the
// cpu backend with one plausible bug; TestSuiteCatchesMutants re-runs this
// test binary once per mutant, running the suite on it, and requires the
// named subtest to fail.

const mutantEnv = "KERNELSTEST_MUTANT"

// mutants maps a mutant's name to the suite subtest that must catch it and
// the backend with the bug.
var mutants = map[string]struct {
	caughtBy string
	wrap     func(inner kernels.Backend) kernels.Backend
}{
	"view-copies":               {"View", func(b kernels.Backend) kernels.Backend { return viewCopies{b} }},
	"gemm-drops-beta":           {"Gemm", func(b kernels.Backend) kernels.Backend { return gemmDropsBeta{b} }},
	"gemm-ignores-transB":       {"Gemm", func(b kernels.Backend) kernels.Backend { return gemmIgnoresTransB{b} }},
	"addbias-skips-last-row":    {"AddBias", func(b kernels.Backend) kernels.Backend { return addBiasSkipsLastRow{b} }},
	"sumrows-drops-beta":        {"SumRows", func(b kernels.Backend) kernels.Backend { return sumRowsDropsBeta{b} }},
	"relugrad-passes-zero":      {"ReluGrad", func(b kernels.Backend) kernels.Backend { return reluGradPassesZero{b} }},
	"softmax-ignores-scale":     {"SoftmaxCrossEntropy", func(b kernels.Backend) kernels.Backend { return softmaxIgnoresScale{b} }},
	"sigmoid-naive-log":         {"SigmoidCrossEntropy", func(b kernels.Backend) kernels.Backend { return sigmoidNaive{b} }},
	"predict-ge-zero":           {"Predict", func(b kernels.Backend) kernels.Backend { return predictGEZero{b} }},
	"sum-drops-last-src":        {"Sum", func(b kernels.Backend) kernels.Backend { return sumDropsLast{b} }},
	"nonfinite-misses-inf":      {"NonFinite", func(b kernels.Backend) kernels.Backend { return nonFiniteNaNOnly{b} }},
	"momentum-drops-wd":         {"Momentum", func(b kernels.Backend) kernels.Backend { return momentumDropsWD{b} }},
	"adagrad-eps-inside-sqrt":   {"Adagrad", func(b kernels.Backend) kernels.Backend { return adagradEpsInside{b} }},
	"adamw-not-decoupled":       {"Adam", func(b kernels.Backend) kernels.Backend { return adamwNotDecoupled{b} }},
	"axpy-writes-then-checks":   {"ErrShape", func(b kernels.Backend) kernels.Backend { return axpyWritesFirst{b} }},
	"gemm-ignores-transA":       {"Gradients", func(b kernels.Backend) kernels.Backend { return gemmIgnoresTransA{b} }},
	"softmax-ignores-stats":     {"SoftmaxCrossEntropy", func(b kernels.Backend) kernels.Backend { return statsIgnored{b} }},
	"sigmoid-ignores-stats":     {"SigmoidCrossEntropy", func(b kernels.Backend) kernels.Backend { return statsIgnored{b} }},
	"gemm-writes-past-c":        {"Gemm", func(b kernels.Backend) kernels.Backend { return &gemmWritesPast{Backend: b} }},
	"bad-labels-clamped":        {"BadLabels", func(b kernels.Backend) kernels.Backend { return badLabelsClamped{b} }},
	"free-pool-not-zeroed":      {"Free", func(b kernels.Backend) kernels.Backend { return &dirtyPool{Backend: b} }},
	"alloc-negative-panics":     {"Alloc", func(b kernels.Backend) kernels.Backend { return allocNegativePanics{b} }},
	"im2col-skips-padding":      {"Im2col", func(b kernels.Backend) kernels.Backend { return im2colNoPad{b.(*cpu.Backend)} }},
	"transpose01-copies":        {"Transpose01", func(b kernels.Backend) kernels.Backend { return transposeCopies{b.(*cpu.Backend)} }},
	"col2im-overwrites":         {"Col2im", func(b kernels.Backend) kernels.Backend { return col2imOverwrites{b.(*cpu.Backend)} }},
	"maxpool-last-on-ties":      {"MaxPool", func(b kernels.Backend) kernels.Backend { return maxPoolLastTie{b.(*cpu.Backend)} }},
	"avgpool-grad-unscaled":     {"AvgPool", func(b kernels.Backend) kernels.Backend { return avgPoolGradUnscaled{b.(*cpu.Backend)} }},
	"maxpool-writes-first":      {"ConvErrShape", func(b kernels.Backend) kernels.Backend { return maxPoolWritesFirst{b.(*cpu.Backend)} }},
	"batchnorm-biased-running":  {"BatchNorm", func(b kernels.Backend) kernels.Backend { return bnBiasedRunning{b.(*cpu.Backend)} }},
	"gelu-tanh-always":          {"Gelu", func(b kernels.Backend) kernels.Backend { return geluTanhAlways{b.(*cpu.Backend)} }},
	"layernorm-grad-no-mean":    {"LayerNorm", func(b kernels.Backend) kernels.Backend { return layerNormGradNoMean{b.(*cpu.Backend)} }},
	"layernorm-one-pass-f32":    {"LayerNorm", func(b kernels.Backend) kernels.Backend { return layerNormOnePass{b.(*cpu.Backend)} }},
	"syncbn-local-count":        {"SyncBatchNorm", func(b kernels.Backend) kernels.Backend { return syncBNLocalCount{b.(*cpu.Backend)} }},
	"lrn-grad-no-cross-term":    {"LRN", func(b kernels.Backend) kernels.Backend { return lrnGradLocal{b.(*cpu.Backend)} }},
	"maxpool-pad-zeros":         {"MaxPoolPad", func(b kernels.Backend) kernels.Backend { return maxPoolPadZeros{b.(*cpu.Backend)} }},
	"dropout-row-key-ignored":   {"Dropout", func(b kernels.Backend) kernels.Backend { return dropoutOneKey{b.(*cpu.Backend)} }},
	"embedding-grad-overwrites": {"Embedding", func(b kernels.Backend) kernels.Backend { return embeddingGradOverwrites{b.(*cpu.Backend)} }},
	"attention-not-causal":      {"Attention", func(b kernels.Backend) kernels.Backend { return attentionNotCausal{b.(*cpu.Backend)} }},
	"attention-grad-no-rowsum":  {"Attention", func(b kernels.Backend) kernels.Backend { return attentionGradNoRowSum{b.(*cpu.Backend)} }},
}

// TestMutant runs the suite on the mutant named by $KERNELSTEST_MUTANT; it
// is run by TestSuiteCatchesMutants and skips otherwise.
func TestMutant(t *testing.T) {
	name := os.Getenv(mutantEnv)
	if name == "" {
		t.Skip("run by TestSuiteCatchesMutants")
	}
	m, ok := mutants[name]
	if !ok {
		t.Fatalf("no mutant %q", name)
	}
	kernelstest.Run(t, func() kernels.Backend { return m.wrap(cpu.New()) })
}

func TestSuiteCatchesMutants(t *testing.T) {
	if os.Getenv(mutantEnv) != "" {
		t.Skip("inside a mutant run")
	}
	if testing.Short() {
		t.Skip("re-runs the test binary once per mutant")
	}
	for name, m := range mutants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestMutant$/^"+m.caughtBy+"$", "-test.count=1")
			cmd.Env = append(os.Environ(), mutantEnv+"="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed the mutant; output:\n%s", out)
			}
			if want := "--- FAIL: TestMutant/" + m.caughtBy; !strings.Contains(string(out), want) {
				t.Fatalf("output lacks %q:\n%s", want, out)
			}
		})
	}
}

// hostOp runs f on host copies of bufs and uploads them back: the mutants
// below that rewrite an op do it on the host, which is enough for a test.
func hostOp(b kernels.Backend, f func(host [][]float32), bufs ...kernels.Buffer) {
	host := make([][]float32, len(bufs))
	for i, buf := range bufs {
		host[i] = make([]float32, buf.Len())
		if err := b.Download(host[i], buf); err != nil {
			panic(err)
		}
	}
	f(host)
	for i, buf := range bufs {
		if err := b.Upload(buf, host[i]); err != nil {
			panic(err)
		}
	}
}

type viewCopies struct{ kernels.Backend }

func (m viewCopies) View(b kernels.Buffer, off, n int) kernels.Buffer {
	c, _ := m.Alloc(n)
	_ = m.Copy(c, m.Backend.View(b, off, n))
	return c
}

type gemmDropsBeta struct{ kernels.Backend }

func (m gemmDropsBeta) Gemm(tA, tB bool, mm, n, k int, alpha float32, a, b kernels.Buffer, beta float32, c kernels.Buffer) error {
	return m.Backend.Gemm(tA, tB, mm, n, k, alpha, a, b, 0, c)
}

type gemmIgnoresTransB struct{ kernels.Backend }

func (m gemmIgnoresTransB) Gemm(tA, tB bool, mm, n, k int, alpha float32, a, b kernels.Buffer, beta float32, c kernels.Buffer) error {
	return m.Backend.Gemm(tA, false, mm, n, k, alpha, a, b, beta, c)
}

// gemmIgnoresTransA breaks every weight gradient (dW = Xᵀ·dY); it is here to
// show that the gradient checks, run on their own, catch it.
type gemmIgnoresTransA struct{ kernels.Backend }

func (m gemmIgnoresTransA) Gemm(tA, tB bool, mm, n, k int, alpha float32, a, b kernels.Buffer, beta float32, c kernels.Buffer) error {
	return m.Backend.Gemm(false, tB, mm, n, k, alpha, a, b, beta, c)
}

type addBiasSkipsLastRow struct{ kernels.Backend }

func (m addBiasSkipsLastRow) AddBias(x, bias kernels.Buffer, rows, cols int) error {
	if rows > 1 && x.Len() == rows*cols {
		return m.Backend.AddBias(m.Backend.View(x, 0, (rows-1)*cols), bias, rows-1, cols)
	}
	return m.Backend.AddBias(x, bias, rows, cols)
}

type sumRowsDropsBeta struct{ kernels.Backend }

func (m sumRowsDropsBeta) SumRows(dst, x kernels.Buffer, rows, cols int, beta float32) error {
	return m.Backend.SumRows(dst, x, rows, cols, 0)
}

type reluGradPassesZero struct{ kernels.Backend }

func (m reluGradPassesZero) ReluGrad(dx, dy, y kernels.Buffer) error {
	if dx.Len() != y.Len() || dy.Len() != y.Len() {
		return m.Backend.ReluGrad(dx, dy, y)
	}
	hostOp(m.Backend, func(h [][]float32) {
		for i, v := range h[2] {
			if v >= 0 {
				h[0][i] = h[1][i]
			} else {
				h[0][i] = 0
			}
		}
	}, dx, dy, y)
	return nil
}

type softmaxIgnoresScale struct{ kernels.Backend }

func (m softmaxIgnoresScale) SoftmaxCrossEntropy(grad, logits, labels kernels.Buffer, rows, cols int, scale float32, stats kernels.Buffer) error {
	return m.Backend.SoftmaxCrossEntropy(grad, logits, labels, rows, cols, 1, stats)
}

// sigmoidNaive computes the loss as log(1 + exp(z)) − y·z in float32, which
// overflows for large z.
type sigmoidNaive struct{ kernels.Backend }

func (m sigmoidNaive) SigmoidCrossEntropy(grad, logits, labels kernels.Buffer, rows int, scale float32, stats kernels.Buffer) error {
	err := m.Backend.SigmoidCrossEntropy(grad, logits, labels, rows, scale, stats)
	if err != nil || grad == logits {
		return err
	}
	hostOp(m.Backend, func(h [][]float32) {
		var loss float64
		for i, z := range h[0] {
			e := float32(math.Exp(float64(z)))
			loss += float64(float32(math.Log(float64(1+e))) - h[1][i]*z)
		}
		h[2][0] = float32(loss)
	}, logits, labels, stats)
	return nil
}

type predictGEZero struct{ kernels.Backend }

func (m predictGEZero) Predict(out, x kernels.Buffer, rows, cols int) error {
	if err := m.Backend.Predict(out, x, rows, cols); err != nil || cols != 1 {
		return err
	}
	hostOp(m.Backend, func(h [][]float32) {
		for i, v := range h[0] {
			if v >= 0 {
				h[1][i] = 1
			}
		}
	}, x, out)
	return nil
}

type sumDropsLast struct{ kernels.Backend }

func (m sumDropsLast) Sum(dst kernels.Buffer, srcs ...kernels.Buffer) error {
	if len(srcs) > 1 {
		srcs = srcs[:len(srcs)-1]
	}
	return m.Backend.Sum(dst, srcs...)
}

type nonFiniteNaNOnly struct{ kernels.Backend }

func (m nonFiniteNaNOnly) NonFinite(x kernels.Buffer) (int, error) {
	at := -1
	hostOp(m.Backend, func(h [][]float32) {
		for i, v := range h[0] {
			if v != v {
				at = i
				return
			}
		}
	}, x)
	return at, nil
}

type momentumDropsWD struct{ kernels.Backend }

func (m momentumDropsWD) Optimize(w, g, v kernels.Buffer, u optim.Update) error {
	if u.Kind == optim.Momentum {
		u.WeightDecay = 0
	}
	return m.Backend.Optimize(w, g, v, u)
}

// adamwNotDecoupled runs AdamW as Adam without weight decay: the
// decoupled decay is dropped.
type adamwNotDecoupled struct{ kernels.Backend }

func (m adamwNotDecoupled) Optimize(w, g, s kernels.Buffer, u optim.Update) error {
	u.Adam.Decoupled, u.Adam.Decay = false, 1
	return m.Backend.Optimize(w, g, s, u)
}

type adagradEpsInside struct{ kernels.Backend }

func (m adagradEpsInside) Optimize(w, g, h kernels.Buffer, u optim.Update) error {
	if u.Kind != optim.Adagrad || g.Len() != w.Len() || h.Len() != w.Len() {
		return m.Backend.Optimize(w, g, h, u)
	}
	lr, eps, wd := u.LR, u.Eps, u.WeightDecay
	hostOp(m.Backend, func(x [][]float32) {
		w, g, h := x[0], x[1], x[2]
		for i := range w {
			gi := g[i] + wd*w[i]
			h[i] += gi * gi
			w[i] -= lr * gi / float32(math.Sqrt(float64(h[i]+eps)))
		}
	}, w, g, h)
	return nil
}

// axpyWritesFirst updates as much of y as x covers before reporting the
// shape error.
type axpyWritesFirst struct{ kernels.Backend }

func (m axpyWritesFirst) Axpy(alpha float32, x, y kernels.Buffer) error {
	if n := min(x.Len(), y.Len()); n != x.Len() || n != y.Len() {
		_ = m.Backend.Axpy(alpha, m.Backend.View(x, 0, n), m.Backend.View(y, 0, n))
	}
	return m.Backend.Axpy(alpha, x, y)
}

// statsIgnored computes the loss ops but leaves stats as they were.
type statsIgnored struct{ kernels.Backend }

func (m statsIgnored) keep(stats kernels.Buffer, op func() error) error {
	old := make([]float32, stats.Len())
	if err := m.Download(old, stats); err != nil {
		return op()
	}
	err := op()
	_ = m.Upload(stats, old)
	return err
}

func (m statsIgnored) SoftmaxCrossEntropy(grad, logits, labels kernels.Buffer, rows, cols int, scale float32, stats kernels.Buffer) error {
	return m.keep(stats, func() error {
		return m.Backend.SoftmaxCrossEntropy(grad, logits, labels, rows, cols, scale, stats)
	})
}

func (m statsIgnored) SigmoidCrossEntropy(grad, logits, labels kernels.Buffer, rows int, scale float32, stats kernels.Buffer) error {
	return m.keep(stats, func() error {
		return m.Backend.SigmoidCrossEntropy(grad, logits, labels, rows, scale, stats)
	})
}

// gemmWritesPast writes one element past C when C is a view with room
// after it: the off-by-one of a kernel that does not check its last tile.
type gemmWritesPast struct {
	kernels.Backend
	parents map[kernels.Buffer]viewOf
}

type viewOf struct {
	parent kernels.Buffer
	off    int
}

func (m *gemmWritesPast) View(b kernels.Buffer, off, n int) kernels.Buffer {
	v := m.Backend.View(b, off, n)
	if m.parents == nil {
		m.parents = map[kernels.Buffer]viewOf{}
	}
	m.parents[v] = viewOf{b, off}
	return v
}

func (m *gemmWritesPast) Gemm(tA, tB bool, mm, n, k int, alpha float32, a, b kernels.Buffer, beta float32, c kernels.Buffer) error {
	if err := m.Backend.Gemm(tA, tB, mm, n, k, alpha, a, b, beta, c); err != nil {
		return err
	}
	if p, ok := m.parents[c]; ok && mm*n > 0 && p.off+c.Len() < p.parent.Len() {
		_ = m.Backend.Fill(m.Backend.View(p.parent, p.off+c.Len(), 1), 0)
	}
	return nil
}

// badLabelsClamped treats any label outside [0, classes) or not an integer
// as class 0: no error, and a finite loss.
type badLabelsClamped struct{ kernels.Backend }

func (m badLabelsClamped) clamp(labels kernels.Buffer, classes int) kernels.Buffer {
	h := make([]float32, labels.Len())
	if err := m.Download(h, labels); err != nil {
		return labels
	}
	for i, l := range h {
		if !(l >= 0 && l < float32(classes)) || l != float32(int(l)) {
			h[i] = 0
		}
	}
	c, _ := m.Alloc(len(h))
	_ = m.Upload(c, h)
	return c
}

func (m badLabelsClamped) SoftmaxCrossEntropy(grad, logits, labels kernels.Buffer, rows, cols int, scale float32, stats kernels.Buffer) error {
	return m.Backend.SoftmaxCrossEntropy(grad, logits, m.clamp(labels, cols), rows, cols, scale, stats)
}

func (m badLabelsClamped) SigmoidCrossEntropy(grad, logits, labels kernels.Buffer, rows int, scale float32, stats kernels.Buffer) error {
	return m.Backend.SigmoidCrossEntropy(grad, logits, m.clamp(labels, 2), rows, scale, stats)
}

// dirtyPool keeps freed buffers and hands them out again, by length,
// without zeroing them.
type dirtyPool struct {
	kernels.Backend
	free map[int][]kernels.Buffer
}

func (m *dirtyPool) Free(b kernels.Buffer) error {
	if b == nil {
		return nil
	}
	if m.free == nil {
		m.free = map[int][]kernels.Buffer{}
	}
	m.free[b.Len()] = append(m.free[b.Len()], b)
	return nil
}

func (m *dirtyPool) Alloc(n int) (kernels.Buffer, error) {
	if l := m.free[n]; len(l) > 0 {
		m.free[n] = l[:len(l)-1]
		return l[len(l)-1], nil
	}
	return m.Backend.Alloc(n)
}

// allocNegativePanics panics on a negative length instead of returning an
// error.
type allocNegativePanics struct{ kernels.Backend }

func (m allocNegativePanics) Alloc(n int) (kernels.Buffer, error) {
	if n < 0 {
		panic("negative length")
	}
	return m.Backend.Alloc(n)
}

// The conv mutants embed the cpu backend itself, so that they keep its
// ConvOps (kernels.ConvOf finds them) and change one.

// im2colNoPad reads padded positions from the clamped edge instead of 0.
type im2colNoPad struct{ *cpu.Backend }

func (m im2colNoPad) Im2col(cols, x kernels.Buffer, n, c, h, w, k, stride, pad int) error {
	if err := m.Backend.Im2col(cols, x, n, c, h, w, k, stride, pad); err != nil || pad == 0 {
		return err
	}
	oh, ow := kernels.ConvOut(h, w, k, stride, pad)
	hostOp(m, func(v [][]float32) {
		cd, xd := v[0], v[1]
		for i := range cd {
			if cd[i] == 0 && len(xd) > 0 {
				cd[i] = xd[(i/(oh*ow))%len(xd)]
			}
		}
	}, cols, x)
	return nil
}

// col2imOverwrites keeps the last contribution to a pixel instead of the sum.
type col2imOverwrites struct{ *cpu.Backend }

func (m col2imOverwrites) Col2im(dx, cols kernels.Buffer, n, c, h, w, k, stride, pad int) error {
	if err := m.Backend.Col2im(dx, cols, n, c, h, w, k, stride, pad); err != nil {
		return err
	}
	hostOp(m, func(v [][]float32) {
		for i := range v[0] {
			v[0][i] *= 0.5
		}
	}, dx)
	return nil
}

// transposeCopies copies src as it is, without swapping the axes.
type transposeCopies struct{ *cpu.Backend }

func (m transposeCopies) Transpose01(dst, src kernels.Buffer, a, b, inner int) error {
	if err := kernels.CheckTranspose("mutant", dst.Len(), src.Len(), a, b, inner); err != nil {
		return err
	}
	return m.Backend.Copy(dst, src)
}

// maxPoolLastTie routes the gradient to the last maximum on ties.
type maxPoolLastTie struct{ *cpu.Backend }

func (m maxPoolLastTie) MaxPoolGrad(dx, dy, x kernels.Buffer, planes, h, w, k, stride int) error {
	if err := m.Backend.MaxPoolGrad(dx, dy, x, planes, h, w, k, stride); err != nil {
		return err
	}
	hostOp(m, func(v [][]float32) {
		d, xs := v[0], v[1]
		for i := 1; i < len(d); i++ {
			if xs[i] == xs[i-1] && d[i-1] != 0 && d[i] == 0 {
				d[i], d[i-1] = d[i-1], 0
			}
		}
	}, dx, x)
	return nil
}

// avgPoolGradUnscaled forgets the 1/(k·k) of the gradient.
type avgPoolGradUnscaled struct{ *cpu.Backend }

func (m avgPoolGradUnscaled) AvgPoolGrad(dx, dy kernels.Buffer, planes, h, w, k, stride int) error {
	if err := m.Backend.AvgPoolGrad(dx, dy, planes, h, w, k, stride); err != nil {
		return err
	}
	hostOp(m, func(v [][]float32) {
		for i := range v[0] {
			v[0][i] *= float32(k * k)
		}
	}, dx)
	return nil
}

// maxPoolWritesFirst writes its output before checking the shapes.
type maxPoolWritesFirst struct{ *cpu.Backend }

func (m maxPoolWritesFirst) MaxPool(y, x kernels.Buffer, planes, h, w, k, stride int) error {
	_ = m.Fill(y, 0)
	return m.Backend.MaxPool(y, x, planes, h, w, k, stride)
}

// bnBiasedRunning keeps the biased variance in the running statistics (as
// PyTorch does not).
type bnBiasedRunning struct{ *cpu.Backend }

func (m bnBiasedRunning) BatchNormTrain(y, mean, invstd, runMean, runVar, x, gamma, beta kernels.Buffer, n, c, hw int, eps, momentum float32) error {
	before := make([]float32, runVar.Len())
	_ = m.Download(before, runVar)
	if err := m.Backend.BatchNormTrain(y, mean, invstd, runMean, runVar, x, gamma, beta, n, c, hw, eps, momentum); err != nil {
		return err
	}
	cnt := float32(n * hw)
	if cnt <= 1 {
		return nil
	}
	hostOp(m, func(v [][]float32) {
		for i := range v[0] {
			// Undo the unbiased variance's factor in the update's new part.
			newPart := v[0][i] - (1-momentum)*before[i]
			v[0][i] = (1-momentum)*before[i] + newPart*(cnt-1)/cnt
		}
	}, runVar)
	return nil
}

// geluTanhAlways computes the tanh approximation whatever is asked
// (1e-3 away from erf's GELU near |x| = 2).
type geluTanhAlways struct{ *cpu.Backend }

func (m geluTanhAlways) Gelu(y, x kernels.Buffer, _ bool) error { return m.Backend.Gelu(y, x, true) }

// layerNormGradNoMean forgets the mean(γ·dy) term of dx.
type layerNormGradNoMean struct{ *cpu.Backend }

func (m layerNormGradNoMean) LayerNormGrad(dx, dgamma, dbeta, dy, x, mean, invstd, gamma kernels.Buffer, rows, cols int) error {
	if err := m.Backend.LayerNormGrad(dx, dgamma, dbeta, dy, x, mean, invstd, gamma, rows, cols); err != nil {
		return err
	}
	hostOp(m, func(h [][]float32) {
		dxs, dys, gs, inv := h[0], h[1], h[2], h[3]
		for r := range rows {
			var s float64
			for j := range cols {
				s += float64(gs[j]) * float64(dys[r*cols+j])
			}
			for j := range cols {
				dxs[r*cols+j] += float32(float64(inv[r]) * s / float64(cols))
			}
		}
	}, dx, dy, gamma, invstd)
	return nil
}

// layerNormOnePass takes each row's variance as E[x²] − E[x]² in
// float32: right near 0, lost far from it.
type layerNormOnePass struct{ *cpu.Backend }

func (m layerNormOnePass) LayerNorm(y, mean, invstd, x, gamma, beta kernels.Buffer, rows, cols int, eps float32) error {
	if err := m.Backend.LayerNorm(y, mean, invstd, x, gamma, beta, rows, cols, eps); err != nil {
		return err
	}
	hostOp(m, func(h [][]float32) {
		ys, ms, is, xs, gs, bs := h[0], h[1], h[2], h[3], h[4], h[5]
		for r := range rows {
			var s, s2 float32
			for j := range cols {
				v := xs[r*cols+j]
				s += v
				s2 += v * v
			}
			mu := s / float32(cols)
			inv := float32(1 / math.Sqrt(float64(max(s2/float32(cols)-mu*mu, 0)+eps)))
			ms[r], is[r] = mu, inv
			for j := range cols {
				ys[r*cols+j] = (xs[r*cols+j]-mu)*inv*gs[j] + bs[j]
			}
		}
	}, y, mean, invstd, x, gamma, beta)
	return nil
}

// dropoutOneKey draws every row's mask from the first row's key.
type dropoutOneKey struct{ *cpu.Backend }

func (m dropoutOneKey) Dropout(y, x, keys kernels.Buffer, rows, cols int, salt, threshold uint32, scale float32) error {
	if err := m.Backend.Dropout(y, x, keys, rows, cols, salt, threshold, scale); err != nil || rows == 0 {
		return err
	}
	hostOp(m, func(h [][]float32) {
		ys, xs, ks := h[0], h[1], h[2]
		key := math.Float32bits(ks[0])
		for i := range rows * cols {
			ys[i] = 0
			if kernels.DropoutKeep(key, salt, uint32(i%cols), threshold) {
				ys[i] = xs[i] * scale
			}
		}
	}, y, x, keys)
	return nil
}

// maxPoolPadZeros pads with zeros, not −∞: a window of negative values at
// an edge gives 0.
type maxPoolPadZeros struct{ *cpu.Backend }

func (m maxPoolPadZeros) MaxPoolPad(y, x kernels.Buffer, planes, h, w, k, stride, pad int) error {
	if err := m.Backend.MaxPoolPad(y, x, planes, h, w, k, stride, pad); err != nil || pad == 0 {
		return err
	}
	oh, ow := kernels.ConvOut(h, w, k, stride, pad)
	hostOp(m, func(hs [][]float32) {
		ys := hs[0]
		for p := range planes {
			for oy := range oh {
				for ox := range ow {
					y0, x0 := oy*stride-pad, ox*stride-pad
					if y0 < 0 || x0 < 0 || y0+k > h || x0+k > w {
						ys[(p*oh+oy)*ow+ox] = max(ys[(p*oh+oy)*ow+ox], 0)
					}
				}
			}
		}
	}, y)
	return nil
}

// lrnGradLocal forgets the other channels' terms of the gradient: dx =
// dy·s^−β only.
type lrnGradLocal struct{ *cpu.Backend }

func (m lrnGradLocal) LRNGrad(dx, dy, x, s kernels.Buffer, n, c, hw, size int, alpha, beta, k float32) error {
	if err := m.Backend.LRNGrad(dx, dy, x, s, n, c, hw, size, alpha, beta, k); err != nil {
		return err
	}
	hostOp(m, func(h [][]float32) {
		for i := range h[0] {
			h[0][i] = float32(float64(h[1][i]) * math.Pow(float64(h[2][i]), -float64(beta)))
		}
	}, dx, dy, s)
	return nil
}

// syncBNLocalCount divides the summed sums by this batch's count, not by
// every rank's.
type syncBNLocalCount struct{ *cpu.Backend }

func (m syncBNLocalCount) BatchNormTrainSums(y, mean, invstd, runMean, runVar, x, gamma, beta, sums kernels.Buffer, count, n, c, hw int, eps, momentum float32) error {
	return m.Backend.BatchNormTrainSums(y, mean, invstd, runMean, runVar, x, gamma, beta, sums, n*hw, n, c, hw, eps, momentum)
}

// embeddingGradOverwrites sets each used row to the last dy row for it,
// instead of adding every one onto what dtable held.
type embeddingGradOverwrites struct{ *cpu.Backend }

func (m embeddingGradOverwrites) EmbeddingGrad(dtable, ids, dy kernels.Buffer, n, vocab, cols int) error {
	if err := m.Backend.EmbeddingGrad(dtable, ids, dy, n, vocab, cols); err != nil {
		return err
	}
	hostOp(m, func(h [][]float32) {
		dt, id, d := h[0], h[1], h[2]
		for r, v := range id {
			copy(dt[int(v)*cols:(int(v)+1)*cols], d[r*cols:(r+1)*cols])
		}
	}, dtable, ids, dy)
	return nil
}

// attentionNotCausal lets every position see the whole sequence: each
// row's probabilities spread over all seq positions (uniformly past the
// diagonal, renormalised), as an attention without its mask would.
type attentionNotCausal struct{ *cpu.Backend }

func (m attentionNotCausal) Attention(y, probs, qkv kernels.Buffer, batch, seq, heads, width int) error {
	if err := m.Backend.Attention(y, probs, qkv, batch, seq, heads, width); err != nil || seq < 2 {
		return err
	}
	hostOp(m, func(h [][]float32) {
		p := h[0]
		for row := 0; row < len(p)/seq; row++ {
			r := p[row*seq : (row+1)*seq]
			for j := range r {
				r[j] = (r[j] + 1/float32(seq)) / 2
			}
		}
	}, probs)
	return nil
}

// attentionGradNoRowSum forgets the softmax Jacobian's row term: dS =
// P ⊙ dP, as if the probabilities did not sum to one.
type attentionGradNoRowSum struct{ *cpu.Backend }

func (m attentionGradNoRowSum) AttentionGrad(dqkv, dy, qkv, probs kernels.Buffer, batch, seq, heads, width int) error {
	if err := m.Backend.AttentionGrad(dqkv, dy, qkv, probs, batch, seq, heads, width); err != nil || seq < 2 {
		return err
	}
	hostOp(m, func(h [][]float32) {
		dq, g, x, pr := h[0], h[1], h[2], h[3]
		d, ld := width/heads, 3*width
		sc := 1 / math.Sqrt(float64(d))
		for b := range batch {
			for hd := range heads {
				at := func(t, part, e int) int { return (b*seq+t)*ld + part*width + hd*d + e }
				for t := range seq {
					for e := range d {
						dq[at(t, 0, e)], dq[at(t, 1, e)] = 0, 0
					}
				}
				for i := range seq {
					for j := range i + 1 {
						var dp float64
						for e := range d {
							dp += float64(g[(b*seq+i)*width+hd*d+e]) * float64(x[at(j, 2, e)])
						}
						ds := float64(pr[((b*heads+hd)*seq+i)*seq+j]) * dp * sc
						for e := range d {
							dq[at(i, 0, e)] += float32(ds * float64(x[at(j, 1, e)]))
							dq[at(j, 1, e)] += float32(ds * float64(x[at(i, 0, e)]))
						}
					}
				}
			}
		}
	}, dqkv, dy, qkv, probs)
	return nil
}
