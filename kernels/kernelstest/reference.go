package kernelstest

import "math"

// The naive float64 reference loops the backends are compared with. Each
// returns, beside the result, the magnitudes its float32 rounding error is
// proportional to, from which the checks build their bounds.

// refGemm returns alpha·op(A)·op(B) + beta·C (row-major, A stored k×m when
// transA, B stored n×k when transB) and per element the magnitude
// |alpha|·Σ_l |op(A)[i,l]·op(B)[l,j]| + |beta·C[i,j]|. beta == 0 ignores C.
func refGemm(transA, transB bool, m, n, k int, alpha float64, a, b []float64, beta float64, c []float64) (want, mag []float64) {
	// opA is op(A) as m rows of k, opBt is op(B)ᵀ as n rows of k, so the
	// inner loop runs along two contiguous rows.
	opA, opBt := make([]float64, m*k), make([]float64, n*k)
	for i := range m {
		for l := range k {
			if transA {
				opA[i*k+l] = a[l*m+i]
			} else {
				opA[i*k+l] = a[i*k+l]
			}
		}
	}
	for j := range n {
		for l := range k {
			if transB {
				opBt[j*k+l] = b[j*k+l]
			} else {
				opBt[j*k+l] = b[l*n+j]
			}
		}
	}
	want, mag = make([]float64, m*n), make([]float64, m*n)
	for i := range m {
		ar := opA[i*k : (i+1)*k]
		for j := range n {
			br := opBt[j*k : (j+1)*k]
			br = br[:len(ar)]
			var sum, abs float64
			for l, av := range ar {
				p := av * br[l]
				sum += p
				abs += math.Abs(p)
			}
			w, g := alpha*sum, math.Abs(alpha)*abs
			if beta != 0 {
				w += beta * c[i*n+j]
				g += math.Abs(beta * c[i*n+j])
			}
			want[i*n+j], mag[i*n+j] = w, g
		}
	}
	return want, mag
}

// argmax returns the index of the first largest element of row.
func argmax(row []float64) int {
	best := 0
	for j, v := range row {
		if v > row[best] {
			best = j
		}
	}
	return best
}

// refSoftmaxCrossEntropy returns scale·(softmax(z) − onehot(labels)) for the
// rows×cols matrix z, the cross-entropy of each row (by log-sum-exp, so any
// z is fine), and how many rows have argmax == label.
func refSoftmaxCrossEntropy(z []float64, labels []float32, rows, cols int, scale float64) (grad, loss []float64, correct int) {
	grad, loss = make([]float64, rows*cols), make([]float64, rows)
	for i := range rows {
		row, g := z[i*cols:(i+1)*cols], grad[i*cols:(i+1)*cols]
		best := argmax(row)
		top := row[best]
		var sum float64
		for _, v := range row {
			sum += math.Exp(v - top)
		}
		for j, v := range row {
			g[j] = scale * math.Exp(v-top) / sum
		}
		l := int(labels[i])
		g[l] -= scale
		loss[i] = math.Log(sum) + top - row[l]
		if best == l {
			correct++
		}
	}
	return grad, loss, correct
}

// refSigmoidCrossEntropy returns scale·(σ(z) − y), the logistic loss of each
// row in its overflow-free softplus form, and how many rows have
// (z > 0) == (y == 1).
func refSigmoidCrossEntropy(z []float64, labels []float32, scale float64) (grad, loss []float64, correct int) {
	grad, loss = make([]float64, len(z)), make([]float64, len(z))
	for i, v := range z {
		y := float64(labels[i])
		e := math.Exp(-math.Abs(v))
		sigma := 1 / (1 + e)
		if v < 0 {
			sigma = e / (1 + e)
		}
		grad[i] = scale * (sigma - y)
		loss[i] = math.Max(v, 0) - y*v + math.Log1p(e)
		if (v > 0) == (y == 1) {
			correct++
		}
	}
	return grad, loss, correct
}

// refRelu returns max(x, 0).
func refRelu(x []float64) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = math.Max(v, 0)
	}
	return y
}
