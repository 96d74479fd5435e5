package kernelstest

import (
	"fmt"
	"math"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// testSoftmaxCrossEntropy compares SoftmaxCrossEntropy with
// refSoftmaxCrossEntropy on random logits, separately and with grad
// aliasing logits, and on logits far beyond float32's exp range. Bounds,
// with p the reference probability and m the row maximum:
//
//	grad[i,j]: |scale|·8u·(cols + 4 + |z[i,j] − m_i|)·p[i,j] + 2u·|want| + tiny
//	loss:      Σ_i 8u·(cols + 4 + |m_i| + |z[i,label]| + loss_i)
//
// (u = 2⁻²⁴; tiny = 2⁻¹²⁶ admits underflow and flush-to-zero), which admits
// a float32 log-sum-exp; correct must be exact.
func testSoftmaxCrossEntropy(t *testing.T, be kernels.Backend) {
	r := newRand(12)
	for _, s := range [][2]int{{0, 3}, {1, 1}, {1, 2}, {5, 3}, {7, 33}, {64, 10}} {
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
	checkSoftmax(t, be, "large logits", z, []int32{0, 2, 1, 3}, 4, cols, 0.25, false)
	checkSoftmax(t, be, "large logits, alias", z, []int32{3, 1, 0, 0}, 4, cols, 1, true)
}

// checkSoftmax runs one SoftmaxCrossEntropy on fresh buffers and compares
// it with the reference within the bounds above.
func checkSoftmax(t *testing.T, be kernels.Backend, name string, z []float32, labels []int32, rows, cols int, scale float32, alias bool) {
	t.Helper()
	zb := load(t, be, z)
	gb := zb
	if !alias {
		gb = load(t, be, filled(len(z), 7))
	}
	loss, correct, err := be.SoftmaxCrossEntropy(gb, zb, labels, rows, cols, scale)
	ok(t, name, err)

	wantGrad, wantLoss, wantCorrect := refSoftmaxCrossEntropy(widen(z), labels, rows, cols, float64(scale))
	bound := make([]float64, len(z))
	var lossSum, lossBound float64
	for i := range rows {
		row := widen(z[i*cols : (i+1)*cols])
		top := row[argmax(row)]
		sum := sumExp(row, top)
		for j, v := range row {
			p := math.Exp(v-top) / sum
			bound[i*cols+j] = math.Abs(float64(scale))*8*unit*(float64(cols)+4+math.Abs(v-top))*p + gamma(1)*math.Abs(wantGrad[i*cols+j]) + tiny
		}
		lossSum += wantLoss[i]
		lossBound += 8 * unit * (float64(cols) + 4 + math.Abs(top) + math.Abs(row[labels[i]]) + wantLoss[i])
	}
	checkWithin(t, name+": grad", read(t, be, gb), wantGrad, bound)
	checkScalar(t, name+": loss", loss, lossSum, lossBound)
	if correct != wantCorrect {
		t.Errorf("%s: correct = %d, want %d", name, correct, wantCorrect)
	}
	if !alias {
		checkExact(t, name+": logits after", read(t, be, zb), z)
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
// float64). Bounds (u = 2⁻²⁴):
//
//	grad: 8u·|scale| + 2u·|want|
//	loss: Σ_i 8u·(1 + |z_i| + loss_i)
//
// and correct must be exact.
func testSigmoidCrossEntropy(t *testing.T, be kernels.Backend) {
	r := newRand(13)
	for _, n := range []int{0, 1, 2, 33, 256} {
		for _, scale := range []float32{1, 1 / float32(max(n, 1)), -2} {
			for _, alias := range []bool{false, true} {
				name := fmt.Sprintf("n=%d,scale=%v,alias=%v", n, scale, alias)
				checkSigmoid(t, be, name, normals(r, n, 4), randLabels(r, n, 2), scale, alias)
			}
		}
	}
	z := []float32{1e4, -1e4, 1e4, -1e4, 100, -100, 30, -30, 0, 0, 17, -17}
	labels := []int32{1, 1, 0, 0, 1, 0, 0, 1, 1, 0, 1, 1}
	checkSigmoid(t, be, "large logits", z, labels, 0.5, false)
	checkSigmoid(t, be, "large logits, alias", z, labels, 1, true)
}

// checkSigmoid runs one SigmoidCrossEntropy on fresh buffers and compares
// it with the reference within the bounds above.
func checkSigmoid(t *testing.T, be kernels.Backend, name string, z []float32, labels []int32, scale float32, alias bool) {
	t.Helper()
	zb := load(t, be, z)
	gb := zb
	if !alias {
		gb = load(t, be, filled(len(z), 7))
	}
	loss, correct, err := be.SigmoidCrossEntropy(gb, zb, labels, scale)
	ok(t, name, err)

	wantGrad, wantLoss, wantCorrect := refSigmoidCrossEntropy(widen(z), labels, float64(scale))
	bound := make([]float64, len(z))
	var lossSum, lossBound float64
	for i, v := range z {
		bound[i] = 8*unit*math.Abs(float64(scale)) + gamma(1)*math.Abs(wantGrad[i])
		lossSum += wantLoss[i]
		lossBound += 8 * unit * (1 + math.Abs(float64(v)) + wantLoss[i])
	}
	checkWithin(t, name+": grad", read(t, be, gb), wantGrad, bound)
	checkScalar(t, name+": loss", loss, lossSum, lossBound)
	if correct != wantCorrect {
		t.Errorf("%s: correct = %d, want %d", name, correct, wantCorrect)
	}
	if !alias {
		checkExact(t, name+": logits after", read(t, be, zb), z)
	}
}

// testPredict checks Predict exactly: the argmax of each row (the random
// rows have no ties), and for one column 1 where x > 0, so 0 and −0 give 0.
func testPredict(t *testing.T, be kernels.Backend) {
	r := newRand(14)
	for _, s := range [][2]int{{0, 0}, {0, 3}, {1, 1}, {1, 5}, {9, 1}, {8, 10}, {33, 7}} {
		rows, cols := s[0], s[1]
		name := fmt.Sprintf("rows=%d,cols=%d", rows, cols)
		x := normals(r, rows*cols, 1)
		if cols == 1 {
			x = withZeros(15, rows)
		}
		want := make([]int32, rows)
		for i := range rows {
			row := widen(x[i*cols : (i+1)*cols])
			if cols == 1 {
				if row[0] > 0 {
					want[i] = 1
				}
				continue
			}
			want[i] = int32(argmax(row))
		}
		out := make([]int32, rows)
		for i := range out {
			out[i] = -7
		}
		xb := load(t, be, x)
		ok(t, name, be.Predict(out, xb, rows, cols))
		for i := range out {
			if out[i] != want[i] {
				t.Errorf("%s: out[%d] = %d, want %d", name, i, out[i], want[i])
			}
		}
		checkExact(t, name+": x after", read(t, be, xb), x)
	}
}
