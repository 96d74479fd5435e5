package kernelstest

import (
	"fmt"
	"math"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// staleStats is what a stats buffer holds before a loss op: a loss op that
// does not write it leaves values no real loss or count has.
var staleStats = []float32{-12345.5, -7}

// testSoftmaxCrossEntropy compares SoftmaxCrossEntropy with
// refSoftmaxCrossEntropy on random logits, separately and with grad
// aliasing logits, and on logits far beyond float32's exp range, within
// softmaxGradBound and softmaxLossBound; the correct count must be exact.
// grad and stats are guarded views.
func testSoftmaxCrossEntropy(t *testing.T, be kernels.Backend) {
	r := newRand(12)
	for _, s := range [][2]int{{0, 3}, {1, 1}, {1, 2}, {5, 3}, {7, 33}, {64, 10}, {1000, 10}, {33, 129}} {
		rows, cols := s[0], s[1]
		for _, scale := range []float32{1, 1 / float32(max(rows, 1)), -0.5} {
			for _, alias := range []bool{false, true} {
				name := fmt.Sprintf("rows=%d,cols=%d,scale=%v,alias=%v", rows, cols, scale, alias)
				checkSoftmax(t, be, name, normals(r, rows*cols, 3), randLabels(r, rows, cols), rows, cols, scale, alias)
			}
		}
	}

	// Stability: no exp of a raw logit fits in float32 (or, for ±1e4, in
	// float64); a shifted log-sum-exp is still exact here.
	const cols = 4
	z := []float32{
		1e4, 1e4 - 3, 1e4 + 1, 1e4 - 50,
		-1e4, -1e4 + 2, -1e4 - 7, -1e4,
		100, -100, 95, 0,
		-100, -120, -110, -130,
	}
	checkSoftmax(t, be, "large logits", z, []float32{0, 2, 1, 3}, 4, cols, 0.25, false)
	checkSoftmax(t, be, "large logits, alias", z, []float32{3, 1, 0, 0}, 4, cols, 1, true)
}

// checkSoftmax runs one SoftmaxCrossEntropy and compares it with the
// reference within the bounds in tolerance.go.
func checkSoftmax(t *testing.T, be kernels.Backend, name string, z, labels []float32, rows, cols int, scale float32, alias bool) {
	t.Helper()
	zb := loadGuarded(t, be, z)
	gb := zb
	if !alias {
		gb = loadGuarded(t, be, filled(len(z), 7))
	}
	lb, sb := load(t, be, labels), loadGuarded(t, be, staleStats)
	ok(t, name, be.SoftmaxCrossEntropy(gb.buf, zb.buf, lb, rows, cols, scale, sb.buf))

	wantGrad, wantLoss, wantCorrect := refSoftmaxCrossEntropy(widen(z), labels, rows, cols, float64(scale))
	bound := make([]float64, len(z))
	var lossSum, lossBound float64
	for i := range rows {
		row := widen(z[i*cols : (i+1)*cols])
		top := row[argmax(row)]
		sum := sumExp(row, top)
		for j, v := range row {
			bound[i*cols+j] = softmaxGradBound(float64(scale), cols, math.Abs(v-top), math.Exp(v-top)/sum, wantGrad[i*cols+j])
		}
		lossSum += wantLoss[i]
		lossBound += softmaxLossBound(cols, top, row[int(labels[i])], wantLoss[i])
	}
	checkWithin(t, name+": grad", gb.read(t, name+": grad"), wantGrad, bound)
	checkStats(t, name, sb.read(t, name+": stats"), lossSum, lossBound, wantCorrect)
	checkExact(t, name+": labels after", read(t, be, lb), labels)
	if !alias {
		checkExact(t, name+": logits after", zb.read(t, name+": logits"), z)
	}
}

// checkStats compares a loss op's stats with the reference loss sum (within
// statsLossBound) and correct count (exactly).
func checkStats(t *testing.T, name string, stats []float32, lossSum, lossBound float64, correct int) {
	t.Helper()
	checkScalar(t, name+": stats[0] (loss sum)", float64(stats[0]), lossSum, statsLossBound(lossSum, lossBound))
	if stats[1] != float32(correct) {
		t.Errorf("%s: stats[1] (correct) = %v, want %d", name, stats[1], correct)
	}
}

// sumExp returns Σ exp(row − top).
func sumExp(row []float64, top float64) float64 {
	var s float64
	for _, v := range row {
		s += math.Exp(v - top)
	}
	return s
}

// testSigmoidCrossEntropy compares SigmoidCrossEntropy with
// refSigmoidCrossEntropy, separately and with grad aliasing logits, on
// random logits and on |z| up to 1e4 (where exp(|z|) overflows even
// float64), within sigmoidGradBound and sigmoidLossBound; the correct count
// must be exact.
func testSigmoidCrossEntropy(t *testing.T, be kernels.Backend) {
	r := newRand(13)
	for _, n := range []int{0, 1, 2, 33, 256, 4099} {
		for _, scale := range []float32{1, 1 / float32(max(n, 1)), -2} {
			for _, alias := range []bool{false, true} {
				name := fmt.Sprintf("n=%d,scale=%v,alias=%v", n, scale, alias)
				checkSigmoid(t, be, name, normals(r, n, 4), randLabels(r, n, 2), scale, alias)
			}
		}
	}
	z := []float32{1e4, -1e4, 1e4, -1e4, 100, -100, 30, -30, 0, 0, 17, -17}
	labels := []float32{1, 1, 0, 0, 1, 0, 0, 1, 1, 0, 1, 1}
	checkSigmoid(t, be, "large logits", z, labels, 0.5, false)
	checkSigmoid(t, be, "large logits, alias", z, labels, 1, true)
}

// checkSigmoid runs one SigmoidCrossEntropy and compares it with the
// reference within the bounds in tolerance.go.
func checkSigmoid(t *testing.T, be kernels.Backend, name string, z, labels []float32, scale float32, alias bool) {
	t.Helper()
	zb := loadGuarded(t, be, z)
	gb := zb
	if !alias {
		gb = loadGuarded(t, be, filled(len(z), 7))
	}
	lb, sb := load(t, be, labels), loadGuarded(t, be, staleStats)
	ok(t, name, be.SigmoidCrossEntropy(gb.buf, zb.buf, lb, len(z), scale, sb.buf))

	wantGrad, wantLoss, wantCorrect := refSigmoidCrossEntropy(widen(z), labels, float64(scale))
	bound := make([]float64, len(z))
	var lossSum, lossBound float64
	for i, v := range z {
		bound[i] = sigmoidGradBound(float64(scale), wantGrad[i])
		lossSum += wantLoss[i]
		lossBound += sigmoidLossBound(float64(v), wantLoss[i])
	}
	checkWithin(t, name+": grad", gb.read(t, name+": grad"), wantGrad, bound)
	checkStats(t, name, sb.read(t, name+": stats"), lossSum, lossBound, wantCorrect)
	checkExact(t, name+": labels after", read(t, be, lb), labels)
	if !alias {
		checkExact(t, name+": logits after", zb.read(t, name+": logits"), z)
	}
}

// testPredict checks Predict exactly: the argmax of each row (the random
// rows have no ties; one row has, and takes the first), and for one column
// 1 where x > 0, so 0 and −0 give 0. out is a guarded view.
func testPredict(t *testing.T, be kernels.Backend) {
	r := newRand(14)
	for _, s := range [][2]int{{0, 0}, {0, 3}, {1, 1}, {1, 5}, {9, 1}, {8, 10}, {33, 7}, {1000, 10}, {3, 257}, {4099, 1}} {
		rows, cols := s[0], s[1]
		name := fmt.Sprintf("rows=%d,cols=%d", rows, cols)
		x := normals(r, rows*cols, 1)
		if cols == 1 {
			x = withZeros(15, rows)
		} else if rows > 1 {
			copy(x[cols:], filled(cols, 2)) // row 1: all tied, argmax 0
		}
		want := make([]float32, rows)
		for i := range rows {
			row := widen(x[i*cols : (i+1)*cols])
			if cols == 1 {
				if row[0] > 0 {
					want[i] = 1
				}
				continue
			}
			want[i] = float32(argmax(row))
		}
		out := loadGuarded(t, be, filled(rows, -7))
		xb := load(t, be, x)
		ok(t, name, be.Predict(out.buf, xb, rows, cols))
		checkExact(t, name+": out", out.read(t, name), want)
		checkExact(t, name+": x after", read(t, be, xb), x)
	}
}

// badLabelCases are labels the loss ops must not take as class indices.
var badLabelCases = []struct {
	name  string
	label float32
}{
	{"-1", -1},
	{"== cols", 3},
	{"huge", 1e9},
	{"fraction", 1.5},
	{"just below 1", 0.99999994},
	{"NaN", float32(math.NaN())},
	{"+Inf", float32(math.Inf(1))},
	{"-0.5", -0.5},
}

// testBadLabels gives each loss op a batch with one bad label (last, so
// that a device sees it late). A backend may return an error wrapping
// kernels.ErrShape, with nothing written; or, if it cannot see the label
// without waiting, return nil and make stats[0] NaN. Either way nothing
// outside the output buffers may be written, the inputs must be left alone,
// and Sync afterwards must not fail.
func testBadLabels(t *testing.T, be kernels.Backend) {
	const rows, cols = 5, 3
	r := newRand(27)
	for _, c := range badLabelCases {
		for _, op := range []string{"SoftmaxCrossEntropy", "SigmoidCrossEntropy"} {
			n, classes := rows*cols, cols
			if op == "SigmoidCrossEntropy" {
				n, classes = rows, 2
			}
			label := c.label
			if op == "SigmoidCrossEntropy" && label == 3 {
				label = 2
			}
			name := fmt.Sprintf("%s label %s", op, c.name)
			z, labels := normals(r, n, 1), randLabels(r, rows, classes)
			labels[rows-1] = label
			grad := filled(n, 7)
			zb, gb, lb, sb := loadGuarded(t, be, z), loadGuarded(t, be, grad), loadGuarded(t, be, labels), loadGuarded(t, be, staleStats)
			var err error
			if op == "SoftmaxCrossEntropy" {
				err = be.SoftmaxCrossEntropy(gb.buf, zb.buf, lb.buf, rows, cols, 1, sb.buf)
			} else {
				err = be.SigmoidCrossEntropy(gb.buf, zb.buf, lb.buf, rows, 1, sb.buf)
			}
			stats := sb.read(t, name+": stats")
			gotGrad := gb.read(t, name+": grad")
			checkBits(t, name+": logits after", zb.read(t, name+": logits"), z)
			checkBits(t, name+": labels after", lb.read(t, name+": labels"), labels)
			ok(t, name+": Sync", be.Sync())
			switch {
			case err != nil:
				if !isShape(err) {
					t.Errorf("%s: error %q does not wrap kernels.ErrShape", name, err)
				}
				checkBits(t, name+": grad after the error", gotGrad, grad)
				checkBits(t, name+": stats after the error", stats, staleStats)
			case !math.IsNaN(float64(stats[0])):
				t.Errorf("%s: no error and stats[0] = %v; want an error wrapping kernels.ErrShape or NaN", name, stats[0])
			}
		}
	}
}
