package cpu

import (
	"math"

	"github.com/dml-project/dml/kernels"
)

// SoftmaxCrossEntropy writes grad = scale·(softmax(logits) − onehot(labels))
// for the rows×cols matrix logits and returns the summed cross-entropy loss
// and the number of rows whose argmax (the first, on ties) equals the label.
// grad may alias logits. A label outside [0, cols) is an error wrapping
// kernels.ErrShape, found before anything is written.
//
// Each row is shifted by its maximum before exponentiating, and the loss is
// log Σ exp(z − max) + max − z[label] in float64, so large logits neither
// overflow nor lose the loss to cancellation.
func (be *Backend) SoftmaxCrossEntropy(grad, logits kernels.Buffer, labels []int32, rows, cols int, scale float32) (float64, int, error) {
	const op = "SoftmaxCrossEntropy"
	gd, zd := be.data(grad), be.data(logits)
	if err := firstError(
		checkMatrix(op, "logits", len(zd), rows, cols),
		checkLen(op, "grad", len(gd), len(zd)),
		checkLen(op, "labels", len(labels), rows),
		checkLabels(op, labels, cols),
	); err != nil {
		return 0, 0, err
	}
	s := float64(scale)
	var lossSum float64
	correct := 0
	for i, l := range labels {
		z := zd[i*cols : (i+1)*cols]
		g := gd[i*cols : (i+1)*cols]
		g = g[:len(z)]
		best, zmax := argmax(z)
		if best == int(l) {
			correct++
		}
		zl := float64(z[l]) // read before g, which may be z, is written
		var sum float64
		for j, v := range z {
			e := math.Exp(float64(v) - float64(zmax))
			g[j] = float32(e)
			sum += e
		}
		lossSum += math.Log(sum) + float64(zmax) - zl
		inv := 1 / sum
		el := float64(g[l])
		for j, e := range g {
			g[j] = float32(s * float64(e) * inv)
		}
		g[l] = float32(s * (el*inv - 1))
	}
	return lossSum, correct, nil
}

// SigmoidCrossEntropy writes grad = scale·(σ(z) − y) for one logit per row
// and returns the summed logistic loss and the number of rows where
// (z > 0) == (y == 1). grad may alias logits. A label other than 0 or 1 is an
// error wrapping kernels.ErrShape, found before anything is written.
//
// The loss is softplus(z) − y·z = max(z, 0) − y·z + log1p(exp(−|z|)) and σ
// is evaluated from exp(−|z|), so neither overflows for large |z|.
func (be *Backend) SigmoidCrossEntropy(grad, logits kernels.Buffer, labels []int32, scale float32) (float64, int, error) {
	const op = "SigmoidCrossEntropy"
	gd, zd := be.data(grad), be.data(logits)
	if err := firstError(
		checkLen(op, "grad", len(gd), len(zd)),
		checkLen(op, "labels", len(labels), len(zd)),
		checkLabels(op, labels, 2),
	); err != nil {
		return 0, 0, err
	}
	s := float64(scale)
	var lossSum float64
	correct := 0
	gd = gd[:len(zd)]
	labels = labels[:len(zd)]
	for i, zf := range zd {
		z, y := float64(zf), float64(labels[i])
		e := math.Exp(-math.Abs(z))
		lossSum += math.Max(z, 0) - y*z + math.Log1p(e)
		p := 1 / (1 + e) // σ(|z|)
		if z < 0 {
			p = e / (1 + e)
		}
		gd[i] = float32(s * (p - y))
		if (zf > 0) == (labels[i] == 1) {
			correct++
		}
	}
	return lossSum, correct, nil
}

// Predict writes the argmax of each row of the rows×cols matrix x into out
// (the first, on ties); for cols == 1 it writes 1 where x > 0, else 0. A row
// with no columns has no argmax, so rows > 0 with cols == 0 is an error.
func (be *Backend) Predict(out []int32, x kernels.Buffer, rows, cols int) error {
	xd := be.data(x)
	if err := firstError(
		checkMatrix("Predict", "x", len(xd), rows, cols),
		checkLen("Predict", "out", len(out), rows),
	); err != nil {
		return err
	}
	if rows > 0 && cols == 0 {
		return shapeError("Predict", "%d rows of 0 columns have no argmax", rows)
	}
	for i := range out {
		row := xd[i*cols : (i+1)*cols]
		if cols == 1 {
			out[i] = 0
			if row[0] > 0 {
				out[i] = 1
			}
			continue
		}
		best, _ := argmax(row)
		out[i] = int32(best)
	}
	return nil
}

// argmax returns the index and value of the first largest element of the
// non-empty row.
func argmax(row []float32) (int, float32) {
	best, top := 0, row[0]
	for j, v := range row {
		if v > top {
			best, top = j, v
		}
	}
	return best, top
}

// checkLabels reports the first label outside [0, classes).
func checkLabels(op string, labels []int32, classes int) error {
	for i, l := range labels {
		if l < 0 || int(l) >= classes {
			return shapeError(op, "label %d of row %d is outside [0, %d)", l, i, classes)
		}
	}
	return nil
}
