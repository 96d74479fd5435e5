package cpu

import (
	"math"

	"github.com/dml-project/dml/kernels"
)

// SoftmaxCrossEntropy writes grad = scale·(softmax(logits) − onehot(labels))
// for the rows×cols matrix logits, and into stats the summed cross-entropy
// loss (accumulated in float64, stored rounded to float32) and the number
// of rows whose argmax (the first, on ties) equals the label. grad may alias
// logits. labels holds rows class indices as float32; one that is not an
// integer in [0, cols) is an error wrapping kernels.ErrShape, found before
// anything is written.
//
// Each row is shifted by its maximum before exponentiating, and the loss is
// log Σ exp(z − max) + max − z[label] in float64, so large logits neither
// overflow nor lose the loss to cancellation.
func (be *Backend) SoftmaxCrossEntropy(grad, logits, labels kernels.Buffer, rows, cols int, scale float32, stats kernels.Buffer) error {
	const op = "SoftmaxCrossEntropy"
	gd, zd, ld, sd := be.data(grad), be.data(logits), be.data(labels), be.data(stats)
	if err := firstError(
		checkMatrix(op, "logits", len(zd), rows, cols),
		checkLen(op, "grad", len(gd), len(zd)),
		checkLen(op, "labels", len(ld), rows),
		checkLen(op, "stats", len(sd), 2),
		checkLabels(op, ld, cols),
	); err != nil {
		return err
	}
	s := float64(scale)
	var lossSum float64
	correct := 0
	for i, lf := range ld {
		l := int(lf)
		z := zd[i*cols : (i+1)*cols]
		g := gd[i*cols : (i+1)*cols]
		g = g[:len(z)]
		best, zmax := argmax(z)
		if best == l {
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
	sd[0], sd[1] = float32(lossSum), float32(correct)
	return nil
}

// SigmoidCrossEntropy writes grad = scale·(σ(z) − y) for one logit per row
// (rows of them), and into stats the summed logistic loss (accumulated in
// float64, stored rounded to float32) and the number of rows where
// (z > 0) == (y == 1). grad may alias logits. A label other than 0 or 1 is
// an error wrapping kernels.ErrShape, found before anything is written.
//
// The loss is softplus(z) − y·z = max(z, 0) − y·z + log1p(exp(−|z|)) and σ
// is evaluated from exp(−|z|), so neither overflows for large |z|.
func (be *Backend) SigmoidCrossEntropy(grad, logits, labels kernels.Buffer, rows int, scale float32, stats kernels.Buffer) error {
	const op = "SigmoidCrossEntropy"
	gd, zd, ld, sd := be.data(grad), be.data(logits), be.data(labels), be.data(stats)
	if err := firstError(
		checkMatrix(op, "logits", len(zd), rows, 1),
		checkLen(op, "grad", len(gd), len(zd)),
		checkLen(op, "labels", len(ld), len(zd)),
		checkLen(op, "stats", len(sd), 2),
		checkLabels(op, ld, 2),
	); err != nil {
		return err
	}
	s := float64(scale)
	var lossSum float64
	correct := 0
	gd = gd[:len(zd)]
	ld = ld[:len(zd)]
	for i, zf := range zd {
		z, y := float64(zf), float64(ld[i])
		e := math.Exp(-math.Abs(z))
		lossSum += math.Max(z, 0) - y*z + math.Log1p(e)
		p := 1 / (1 + e) // σ(|z|)
		if z < 0 {
			p = e / (1 + e)
		}
		gd[i] = float32(s * (p - y))
		if (zf > 0) == (ld[i] == 1) {
			correct++
		}
	}
	sd[0], sd[1] = float32(lossSum), float32(correct)
	return nil
}

// Predict writes the argmax of each row of the rows×cols matrix x into out
// as a float32 class index (the first, on ties); for cols == 1 it writes 1
// where x > 0, else 0. A row with no columns has no argmax, so rows > 0 with
// cols == 0 is an error.
func (be *Backend) Predict(out, x kernels.Buffer, rows, cols int) error {
	od, xd := be.data(out), be.data(x)
	if err := firstError(
		checkMatrix("Predict", "x", len(xd), rows, cols),
		checkLen("Predict", "out", len(od), rows),
	); err != nil {
		return err
	}
	if rows > 0 && cols == 0 {
		return shapeError("Predict", "%d rows of 0 columns have no argmax", rows)
	}
	for i := range od {
		row := xd[i*cols : (i+1)*cols]
		if cols == 1 {
			od[i] = 0
			if row[0] > 0 {
				od[i] = 1
			}
			continue
		}
		best, _ := argmax(row)
		od[i] = float32(best)
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

// checkLabels reports the first label that is not an integer in
// [0, classes) (NaN included).
func checkLabels(op string, labels []float32, classes int) error {
	for i, l := range labels {
		if !(l >= 0 && float64(l) < float64(classes)) || l != float32(int(l)) {
			return shapeError(op, "label %v of row %d is not a class index in [0, %d)", l, i, classes)
		}
	}
	return nil
}
