//go:build cuda

package cuda

import (
	"math"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/kernels/ptx"
)

// Every op checks its shapes on the host, then queues its kernels
// (kernels/cu/ABI.md) on the backend's stream and returns: nothing in a
// step waits for the device except Download, Dot, NonFinite and Sync.

// matrixOK reports whether rows×cols is a valid shape with rows*cols == n.
func matrixOK(n, rows, cols int) bool {
	if rows < 0 || cols < 0 || (cols != 0 && rows > math.MaxInt/cols) {
		return false
	}
	return rows*cols == n
}

// AddBias adds bias[j] to every x[i, j] of the rows×cols matrix x.
func (be *Backend) AddBias(x, bias kernels.Buffer, rows, cols int) error {
	const op = "AddBias"
	xd, bd := be.buf(x), be.buf(bias)
	if err := be.usable(op); err != nil {
		return err
	}
	if !matrixOK(xd.n, rows, cols) || bd.n != cols {
		return be.shapeErr(op, "x has %d elements, bias %d, for rows=%d cols=%d", xd.n, bd.n, rows, cols)
	}
	if xd.n == 0 {
		return nil
	}
	return be.done(op, be.launch1D(be.dev.k.addBias, xd.n, ptr(xd), ptr(bd), i64(rows), i64(cols)), rows, cols)
}

// SumRows sets dst[j] = beta·dst[j] + Σ_i x[i, j], in two deterministic
// stages: per-block partial sums of rowsPerBlock rows into scratch, then
// the partials' sum per column, each stage over 8 lanes of a column in a
// fixed order (ABI.md).
func (be *Backend) SumRows(dst, x kernels.Buffer, rows, cols int, beta float32) error {
	const op = "SumRows"
	dd, xd := be.buf(dst), be.buf(x)
	if err := be.usable(op); err != nil {
		return err
	}
	if !matrixOK(xd.n, rows, cols) || dd.n != cols {
		return be.shapeErr(op, "x has %d elements, dst %d, for rows=%d cols=%d", xd.n, dd.n, rows, cols)
	}
	if cols == 0 {
		return nil
	}
	if rows == 0 {
		if beta == 0 {
			return be.done(op, be.q.memset32(dd.ptr, 0, cols), rows, cols)
		}
		return be.done(op, be.launch1D(be.dev.k.scale, cols, ptr(dd), i64(cols), f32(beta)), rows, cols)
	}
	rpb, parts := sumRowsParts(rows)
	s, err := be.scratch(op, parts*cols, rows, cols)
	if err != nil {
		return err
	}
	defer be.release(s)
	k := &be.dev.k
	if err := be.launch(k.sumRowsPartial, ceilDiv(cols, sumCols), parts, threads,
		ptrAt(s.ptr), ptr(xd), i64(rows), i64(cols), i64(rpb)); err != nil {
		return be.deviceErr(op, dimsString([]int{rows, cols}), err)
	}
	return be.done(op, be.launch(k.sumRowsFinal, ceilDiv(cols, sumCols), 1, threads,
		ptr(dd), ptrAt(s.ptr), i64(parts), i64(cols), f32(beta)), rows, cols)
}

// sumCols is the columns a block of dml_sum_rows_partial and _final adds
// (ABI.md: 32 columns × 8 lanes of rows).
const sumCols = 32

// sumRowsParts is SumRows's split of rows into parts of rpb rows: at
// least 64 rows a part and at most 256 parts, so that a lane adds at
// most max(8, rows/2048) rows in the first stage and 32 parts in the
// second, one after the other. (One
// thread per column adding every part in turn, as before, took 57 µs per
// bias gradient of the GPT's 8192 rows on an H200: 0.91 ms of its step.)
func sumRowsParts(rows int) (rpb, parts int) {
	rpb = max(64, ceilDiv(rows, 256))
	return rpb, ceilDiv(rows, rpb)
}

// Relu sets y = max(x, 0); y may alias x.
func (be *Backend) Relu(y, x kernels.Buffer) error {
	const op = "Relu"
	yd, xd := be.buf(y), be.buf(x)
	if err := be.usable(op); err != nil {
		return err
	}
	if yd.n != xd.n {
		return be.shapeErr(op, "y has %d elements, x %d", yd.n, xd.n)
	}
	if xd.n == 0 {
		return nil
	}
	return be.done(op, be.launch1D(be.dev.k.relu, xd.n, ptr(yd), ptr(xd), i64(xd.n)), xd.n)
}

// ReluGrad sets dx = dy where y > 0, else 0; dx may alias dy.
func (be *Backend) ReluGrad(dx, dy, y kernels.Buffer) error {
	const op = "ReluGrad"
	a, b, c := be.buf(dx), be.buf(dy), be.buf(y)
	if err := be.usable(op); err != nil {
		return err
	}
	if a.n != b.n || b.n != c.n {
		return be.shapeErr(op, "dx has %d elements, dy %d, y %d", a.n, b.n, c.n)
	}
	if a.n == 0 {
		return nil
	}
	return be.done(op, be.launch1D(be.dev.k.reluGrad, a.n, ptr(a), ptr(b), ptr(c), i64(a.n)), a.n)
}

// SoftmaxCrossEntropy: see kernels.Backend. A label outside [0, cols)
// makes stats[0] NaN (the device cannot report it without waiting).
func (be *Backend) SoftmaxCrossEntropy(grad, logits, labels kernels.Buffer, rows, cols int, scale float32, stats kernels.Buffer) error {
	const op = "SoftmaxCrossEntropy"
	gd, zd, ld, sd := be.buf(grad), be.buf(logits), be.buf(labels), be.buf(stats)
	if err := be.usable(op); err != nil {
		return err
	}
	switch {
	case !matrixOK(zd.n, rows, cols):
		return be.shapeErr(op, "logits have %d elements, want rows=%d × cols=%d", zd.n, rows, cols)
	case gd.n != zd.n:
		return be.shapeErr(op, "grad has %d elements, logits %d", gd.n, zd.n)
	case ld.n != rows:
		return be.shapeErr(op, "labels have %d elements, want rows=%d", ld.n, rows)
	case sd.n != 2:
		return be.shapeErr(op, "stats has %d elements, want 2", sd.n)
	case rows > 0 && cols == 0:
		return be.shapeErr(op, "%d rows of 0 classes: no label fits", rows)
	}
	if rows == 0 {
		return be.done(op, be.q.memset32(sd.ptr, 0, 2), rows, cols)
	}
	s, err := be.scratch(op, 2*rows, rows, cols)
	if err != nil {
		return err
	}
	defer be.release(s)
	loss, ok := s.ptr, s.ptr+uint64(rows)*4
	k := &be.dev.k
	if err := be.launch(k.softmaxXent, rows, 1, threads,
		ptr(gd), ptr(zd), ptr(ld), i64(rows), i64(cols), f32(scale), ptrAt(loss), ptrAt(ok)); err != nil {
		return be.deviceErr(op, dimsString([]int{rows, cols}), err)
	}
	return be.done(op, be.launch(k.stats, 1, 1, threads, ptr(sd), ptrAt(loss), ptrAt(ok), i64(rows)), rows, cols)
}

// SigmoidCrossEntropy: see kernels.Backend. A label other than 0 or 1
// makes stats[0] NaN.
func (be *Backend) SigmoidCrossEntropy(grad, logits, labels kernels.Buffer, rows int, scale float32, stats kernels.Buffer) error {
	const op = "SigmoidCrossEntropy"
	gd, zd, ld, sd := be.buf(grad), be.buf(logits), be.buf(labels), be.buf(stats)
	if err := be.usable(op); err != nil {
		return err
	}
	switch {
	case rows < 0 || zd.n != rows:
		return be.shapeErr(op, "logits have %d elements, want rows=%d", zd.n, rows)
	case gd.n != zd.n:
		return be.shapeErr(op, "grad has %d elements, logits %d", gd.n, zd.n)
	case ld.n != rows:
		return be.shapeErr(op, "labels have %d elements, want rows=%d", ld.n, rows)
	case sd.n != 2:
		return be.shapeErr(op, "stats has %d elements, want 2", sd.n)
	}
	if rows == 0 {
		return be.done(op, be.q.memset32(sd.ptr, 0, 2), rows)
	}
	s, err := be.scratch(op, 2*rows, rows)
	if err != nil {
		return err
	}
	defer be.release(s)
	loss, ok := s.ptr, s.ptr+uint64(rows)*4
	k := &be.dev.k
	if err := be.launch1D(k.sigmoidXent, rows,
		ptr(gd), ptr(zd), ptr(ld), i64(rows), f32(scale), ptrAt(loss), ptrAt(ok)); err != nil {
		return be.deviceErr(op, dimsString([]int{rows}), err)
	}
	return be.done(op, be.launch(k.stats, 1, 1, threads, ptr(sd), ptrAt(loss), ptrAt(ok), i64(rows)), rows)
}

// Predict writes each row's first argmax (cols == 1: x > 0) into out.
func (be *Backend) Predict(out, x kernels.Buffer, rows, cols int) error {
	const op = "Predict"
	od, xd := be.buf(out), be.buf(x)
	if err := be.usable(op); err != nil {
		return err
	}
	switch {
	case !matrixOK(xd.n, rows, cols):
		return be.shapeErr(op, "x has %d elements, want rows=%d × cols=%d", xd.n, rows, cols)
	case od.n != rows:
		return be.shapeErr(op, "out has %d elements, want rows=%d", od.n, rows)
	case rows > 0 && cols == 0:
		return be.shapeErr(op, "%d rows of 0 columns have no argmax", rows)
	}
	if rows == 0 {
		return nil
	}
	return be.done(op, be.launch(be.dev.k.predict, rows, 1, threads, ptr(od), ptr(xd), i64(rows), i64(cols)), rows, cols)
}

// Axpy sets y += alpha·x.
func (be *Backend) Axpy(alpha float32, x, y kernels.Buffer) error {
	const op = "Axpy"
	xd, yd := be.buf(x), be.buf(y)
	if err := be.usable(op); err != nil {
		return err
	}
	if xd.n != yd.n {
		return be.shapeErr(op, "x has %d elements, y %d", xd.n, yd.n)
	}
	if xd.n == 0 {
		return nil
	}
	return be.done(op, be.launch1D(be.dev.k.axpy, xd.n, ptr(yd), ptr(xd), i64(xd.n), f32(alpha)), xd.n)
}

// Scale sets x *= alpha.
func (be *Backend) Scale(alpha float32, x kernels.Buffer) error {
	const op = "Scale"
	xd := be.buf(x)
	if err := be.usable(op); err != nil {
		return err
	}
	if xd.n == 0 {
		return nil
	}
	return be.done(op, be.launch1D(be.dev.k.scale, xd.n, ptr(xd), i64(xd.n), f32(alpha)), xd.n)
}

// Sum sets dst = Σ srcs element-wise, adding in the order given (as the
// CPU backend does); with no srcs it zeroes dst. dst may be srcs[0] or
// srcs[1], but no later src.
func (be *Backend) Sum(dst kernels.Buffer, srcs ...kernels.Buffer) error {
	const op = "Sum"
	dd := be.buf(dst)
	ss := make([]*Buffer, len(srcs))
	for i, s := range srcs {
		ss[i] = be.buf(s)
	}
	if err := be.usable(op); err != nil {
		return err
	}
	for i, s := range ss {
		if s.n != dd.n {
			return be.shapeErr(op, "srcs[%d] has %d elements, dst %d", i, s.n, dd.n)
		}
	}
	if dd.n == 0 {
		return nil
	}
	switch len(ss) {
	case 0:
		return be.done(op, be.q.memset32(dd.ptr, 0, dd.n), dd.n, 0)
	case 1:
		return be.Copy(dst, srcs[0])
	}
	k := &be.dev.k
	if err := be.launch1D(k.add, dd.n, ptr(dd), ptr(ss[0]), ptr(ss[1]), i64(dd.n)); err != nil {
		return be.deviceErr(op, dimsString([]int{dd.n, len(ss)}), err)
	}
	for _, s := range ss[2:] {
		if err := be.launch1D(k.add, dd.n, ptr(dd), ptr(dd), ptr(s), i64(dd.n)); err != nil {
			return be.deviceErr(op, dimsString([]int{dd.n, len(ss)}), err)
		}
	}
	return be.record(op, dd.n, len(ss))
}

// dotBlocks is the number of partial sums of Dot: a function of n only,
// so the summation order, and the result, do not depend on the device.
func dotBlocks(n int) int { return max(1, min(ceilDiv(n, threads), ptx.DotMaxBlocks)) }

// Dot returns Σ x·y, accumulated in float64 in a fixed order. It waits for
// the device.
func (be *Backend) Dot(x, y kernels.Buffer) (float64, error) {
	const op = "Dot"
	xd, yd := be.buf(x), be.buf(y)
	if err := be.usable(op); err != nil {
		return 0, err
	}
	if xd.n != yd.n {
		return 0, be.shapeErr(op, "x has %d elements, y %d", xd.n, yd.n)
	}
	if xd.n == 0 {
		return 0, be.Sync()
	}
	parts := dotBlocks(xd.n)
	s, err := be.scratch(op, 2*(parts+1), xd.n)
	if err != nil {
		return 0, err
	}
	defer be.release(s)
	out := s.ptr + uint64(parts)*8
	k := &be.dev.k
	if err := be.launch(k.dotPartial, parts, 1, threads, ptrAt(s.ptr), ptr(xd), ptr(yd), i64(xd.n)); err != nil {
		return 0, be.deviceErr(op, dimsString([]int{xd.n}), err)
	}
	if err := be.done(op, be.launch(k.dotFinal, 1, 1, threads, ptrAt(out), ptrAt(s.ptr), i64(parts)), xd.n); err != nil {
		return 0, err
	}
	v, err := be.read8(op, dimsString([]int{xd.n}), out)
	return math.Float64frombits(v), err
}

// NonFinite returns the index of the first NaN or ±Inf in x, or -1. It
// waits for the device.
func (be *Backend) NonFinite(x kernels.Buffer) (int, error) {
	const op = "NonFinite"
	xd := be.buf(x)
	if err := be.usable(op); err != nil {
		return 0, err
	}
	if xd.n == 0 {
		return -1, be.Sync()
	}
	s, err := be.scratch(op, 2, xd.n)
	if err != nil {
		return 0, err
	}
	defer be.release(s)
	n := uint64(xd.n)
	// first = n, as two 32-bit words (little-endian).
	if err := be.q.memset32(s.ptr, uint32(n), 1); err != nil {
		return 0, be.deviceErr(op, dimsString([]int{xd.n}), err)
	}
	if err := be.q.memset32(s.ptr+4, uint32(n>>32), 1); err != nil {
		return 0, be.deviceErr(op, dimsString([]int{xd.n}), err)
	}
	if err := be.done(op, be.launch1D(be.dev.k.nonFinite, xd.n, ptrAt(s.ptr), ptr(xd), i64(xd.n)), xd.n); err != nil {
		return 0, err
	}
	v, err := be.read8(op, dimsString([]int{xd.n}), s.ptr)
	if err != nil {
		return 0, err
	}
	if v >= n {
		return -1, nil
	}
	return int(v), nil
}

// Optimize applies the update u with its rule's kernel (optim.Kind.Kernel,
// looked up once per device from optim.Kinds): (w, g, state, n) (no state
// for a rule that keeps none) and then u.AppendScalars, the same for every rule
// (ABI.md). A per-tensor rule (LARS)
// first computes its tensor's rate on the device: the two sums of squares
// in optim.SumSquares's chunks, then dml_lars_rate (one thread adds the
// chunks in order), which the rule's kernel reads. Nothing waits for the
// device.
func (be *Backend) Optimize(w, g, s kernels.Buffer, u optim.Update) error {
	op := kernels.OptimizeOp(u.Kind)
	if !u.Kind.Valid() {
		return be.shapeErr(op, "no such rule")
	}
	x, y := be.buf(w), be.buf(g)
	per := u.Kind.StatePer()
	var z *Buffer
	zn := 0
	if per > 0 {
		z = be.buf(s)
		zn = z.n
	}
	if err := be.usable(op); err != nil {
		return err
	}
	if x.n != y.n || zn != per*x.n {
		return be.shapeErr(op, "w has %d elements, g %d, state %d (want %d)", x.n, y.n, zn, per*x.n)
	}
	if x.n == 0 {
		return nil
	}
	var state, rate devPtr
	if z != nil {
		state = z.ptr
	}
	if u.Kind.PerTensor() {
		sc, r, err := be.trustRate(op, x, y, &u.LARS)
		if err != nil {
			return err
		}
		defer be.release(sc)
		rate = r
	}
	var slots [16]uint64
	args := optimizeArgs(slots[:0], x.ptr, y.ptr, state, x.n, rate, &u)
	return be.done(op, be.launch1D(be.dev.k.rules[u.Kind], x.n, args...), x.n)
}

// optimizeArgs appends to dst the arguments of u's kernel (ABI.md's
// optimizer convention): the weights w, the gradient g, the state (for a
// rule that keeps one), n, the rate's address (for a per-tensor rule),
// then u.AppendScalars as floats.
func optimizeArgs(dst []uint64, w, g, state devPtr, n int, rate devPtr, u *optim.Update) []uint64 {
	dst = append(dst, ptrAt(w), ptrAt(g))
	if u.Kind.HasState() {
		dst = append(dst, ptrAt(state))
	}
	dst = append(dst, i64(n))
	if u.Kind.PerTensor() {
		dst = append(dst, ptrAt(rate))
	}
	var scalars [16]float32
	for _, v := range u.AppendScalars(scalars[:0]) {
		dst = append(dst, f32(v))
	}
	return dst
}

// trustRate queues LARS's rate (lr·trust, a float32: optim.LARSUpdate's
// bits) for the tensor x with gradient y. It returns the scratch that holds
// it (release it once the rule's kernel is queued) and the rate's address
// in it, after the partial sums.
func (be *Backend) trustRate(op string, x, y *Buffer, s *optim.LARSStep) (*allocation, devPtr, error) {
	parts := ceilDiv(x.n, optim.NormChunk)
	// 2·parts float64 partial sums, then the rate (a float32 in 8 bytes).
	sc, err := be.scratch(op, 4*parts+2, x.n)
	if err != nil {
		return nil, 0, err
	}
	rate := sc.ptr + uint64(parts)*16
	k := &be.dev.k
	if err := be.launch1D(k.sumsq2Partial, parts, ptrAt(sc.ptr), ptr(x), ptr(y), i64(x.n), i64(optim.NormChunk)); err != nil {
		be.release(sc)
		return nil, 0, be.deviceErr(op, dimsString([]int{x.n}), err)
	}
	if err := be.launch(k.larsRate, 1, 1, 1, ptrAt(rate), ptrAt(sc.ptr), i64(parts), f64(s.LR), f64(s.TrustCoef), f64(s.WeightDecay64)); err != nil {
		be.release(sc)
		return nil, 0, be.deviceErr(op, dimsString([]int{x.n}), err)
	}
	return sc, rate, nil
}
