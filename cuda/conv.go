//go:build cuda

package cuda

import (
	"github.com/dml-project/dml/kernels"
)

// The ops of convolutional networks (kernels/cu/conv.cu; ABI.md, module
// conv); batch norm through cuDNN where it serves (providers.go). Shapes are checked with the same functions as the CPU backend's
// (kernels.CheckConv, CheckPool, CheckNorm), before anything is queued.

var (
	_ kernels.ConvOps = (*Backend)(nil)
	_ kernels.NormOps = (*Backend)(nil)
)

// Im2col: see kernels.ConvOps.
func (be *Backend) Im2col(cols, x kernels.Buffer, n, c, h, w, k, stride, pad int) error {
	const op = "Im2col"
	cd, xd := be.buf(cols), be.buf(x)
	return be.imageOp(op, be.dev.k.im2col, cd, xd, xd.n, cd.n, n, c, h, w, k, stride, pad)
}

// Col2im: see kernels.ConvOps. Each pixel gathers its column entries in
// the order the CPU backend scatters them: the same bits.
func (be *Backend) Col2im(dx, cols kernels.Buffer, n, c, h, w, k, stride, pad int) error {
	const op = "Col2im"
	dd, cd := be.buf(dx), be.buf(cols)
	return be.imageOp(op, be.dev.k.col2im, dd, cd, dd.n, cd.n, n, c, h, w, k, stride, pad)
}

// imageOp checks and queues Im2col (dst = cols) or Col2im (dst = dx),
// given the image's and the columns' lengths: a grid-stride kernel over
// the elements of dst.
func (be *Backend) imageOp(op string, f function, dst, src *Buffer, imgLen, colsLen, n, c, h, w, k, stride, pad int) error {
	if err := be.usable(op); err != nil {
		return err
	}
	if err := kernels.CheckConv("cuda."+op, imgLen, colsLen, n, c, h, w, k, stride, pad); err != nil {
		return err
	}
	if dst.n == 0 {
		return nil
	}
	oh, ow := kernels.ConvOut(h, w, k, stride, pad)
	return be.done(op, be.launch1D(f, dst.n, ptr(dst), ptr(src), i64(n), i64(c), i64(h), i64(w), i64(k), i64(stride), i64(pad), i64(oh), i64(ow)), n, c, h, w, k, stride, pad)
}

// im2col queues dml_im2col, a grid-stride kernel over the c·k·k·n·oh·ow
// columns, on device pointers (the cuBLAS filter gradient's chunks).
// (Rows over the grid's y and columns over x, which divides less per
// element, measured slower on an H200: 1.89 against 1.36 ms of ResNet-20's
// step; tried and dropped.)
func (be *Backend) im2col(cols, x devPtr, n, c, h, w, k, stride, pad int) error {
	oh, ow := kernels.ConvOut(h, w, k, stride, pad)
	return be.launch1D(be.dev.k.im2col, c*k*k*n*oh*ow, ptrAt(cols), ptrAt(x), i64(n), i64(c), i64(h), i64(w), i64(k),
		i64(stride), i64(pad), i64(oh), i64(ow))
}

// Transpose01: see kernels.ConvOps.
func (be *Backend) Transpose01(dst, src kernels.Buffer, a, b, inner int) error {
	const op = "Transpose01"
	dd, sd := be.buf(dst), be.buf(src)
	if err := be.usable(op); err != nil {
		return err
	}
	if err := kernels.CheckTranspose("cuda."+op, dd.n, sd.n, a, b, inner); err != nil {
		return err
	}
	if dd.n == 0 {
		return nil
	}
	return be.done(op, be.launch1D(be.dev.k.transpose01, dd.n, ptr(dd), ptr(sd), i64(a), i64(b), i64(inner)), a, b, inner)
}

// poolArgs are a pooling kernel's trailing arguments.
func poolArgs(planes, h, w, k, stride int) []uint64 {
	oh, ow := kernels.ConvOut(h, w, k, stride, 0)
	return []uint64{i64(planes), i64(h), i64(w), i64(k), i64(stride), i64(oh), i64(ow)}
}

// poolOp checks a pooling op (poolCheck) and queues f over work elements.
func (be *Backend) poolOp(op string, f function, xLen, yLen, work int, lead []uint64, planes, h, w, k, stride int, same ...*Buffer) error {
	if err := be.poolCheck(op, xLen, yLen, planes, h, w, k, stride, same...); err != nil {
		return err
	}
	return be.poolLaunch(op, f, work, lead, planes, h, w, k, stride)
}

// poolCheck checks a pooling op: x of planes·h·w, y of planes·oh·ow, the
// extra buffers of x's length.
func (be *Backend) poolCheck(op string, xLen, yLen, planes, h, w, k, stride int, same ...*Buffer) error {
	if err := be.usable(op); err != nil {
		return err
	}
	if err := kernels.CheckPool("cuda."+op, xLen, yLen, planes, h, w, k, stride); err != nil {
		return err
	}
	for _, b := range same {
		if b.n != xLen {
			return be.shapeErr(op, "a buffer has %d elements, the input %d", b.n, xLen)
		}
	}
	return nil
}

// poolLaunch queues a checked pooling kernel f over work elements.
func (be *Backend) poolLaunch(op string, f function, work int, lead []uint64, planes, h, w, k, stride int) error {
	if work == 0 {
		return nil
	}
	return be.done(op, be.launch1D(f, work, append(lead, poolArgs(planes, h, w, k, stride)...)...), planes, h, w, k, stride)
}

// MaxPool: see kernels.ConvOps.
func (be *Backend) MaxPool(y, x kernels.Buffer, planes, h, w, k, stride int) error {
	yd, xd := be.buf(y), be.buf(x)
	return be.poolOp("MaxPool", be.dev.k.maxPool, xd.n, yd.n, yd.n, []uint64{ptr(yd), ptr(xd)}, planes, h, w, k, stride)
}

// MaxPoolGrad: see kernels.ConvOps (one thread per input pixel, which
// adds the gradients of the windows it is the maximum of, in order; where
// the windows do not overlap, dx zeroed and one thread per window writing
// its argmax's: the same bits, a quarter of the threads for LeNet-5's
// 2×2 pools and no argmax computed four times).
func (be *Backend) MaxPoolGrad(dx, dy, x kernels.Buffer, planes, h, w, k, stride int) error {
	const op = "MaxPoolGrad"
	dd, gd, xd := be.buf(dx), be.buf(dy), be.buf(x)
	if err := be.poolCheck(op, xd.n, gd.n, planes, h, w, k, stride, dd); err != nil {
		return err
	}
	args := []uint64{ptr(dd), ptr(gd), ptr(xd)}
	if stride < k || xd.n == 0 {
		return be.poolLaunch(op, be.dev.k.maxPoolGrad, xd.n, args, planes, h, w, k, stride)
	}
	if err := be.q.memset32(dd.ptr, 0, dd.n); err != nil {
		return be.deviceErr(op, dimsString([]int{planes, h, w, k, stride}), err)
	}
	return be.poolLaunch(op, be.dev.k.maxPoolGradDisjoint, gd.n, args, planes, h, w, k, stride)
}

// AvgPool: see kernels.ConvOps.
func (be *Backend) AvgPool(y, x kernels.Buffer, planes, h, w, k, stride int) error {
	yd, xd := be.buf(y), be.buf(x)
	return be.poolOp("AvgPool", be.dev.k.avgPool, xd.n, yd.n, yd.n, []uint64{ptr(yd), ptr(xd)}, planes, h, w, k, stride)
}

// AvgPoolGrad: see kernels.ConvOps.
func (be *Backend) AvgPoolGrad(dx, dy kernels.Buffer, planes, h, w, k, stride int) error {
	dd, gd := be.buf(dx), be.buf(dy)
	return be.poolOp("AvgPoolGrad", be.dev.k.avgPoolGrad, dd.n, gd.n, dd.n, []uint64{ptr(dd), ptr(gd)}, planes, h, w, k, stride)
}

// bnSplits is how many slices each channel's n·hw values are summed in
// (dml_bn_partial): about 4096 values a block, at most 256 slices — a
// function of the shape alone, so that the sums, and the bits, are the
// same on every GPU.
func bnSplits(n, hw int) int { return max(1, min(256, ceilDiv(n*hw, 4096))) }

// bnPartialGrid is the grid of the partial-sum kernels: one block per
// (channel, slice), at most 32 per multiprocessor (they loop over the
// rest; the result does not depend on it).
func (be *Backend) bnPartialGrid(blocks int) int { return max(1, min(blocks, 32*be.dev.SMs)) }

// normCheck checks a batch-norm op's shapes: x of n·c·hw, the
// per-channel buffers of c, and the others of x's length.
func (be *Backend) normCheck(op string, x *Buffer, n, c, hw int, perChannel []*Buffer, same ...*Buffer) error {
	if err := be.usable(op); err != nil {
		return err
	}
	lens := make([]int, len(perChannel))
	for i, b := range perChannel {
		lens[i] = b.n
	}
	if err := kernels.CheckNorm("cuda."+op, x.n, n, c, hw, lens...); err != nil {
		return err
	}
	for _, b := range same {
		if b.n != x.n {
			return be.shapeErr(op, "a buffer has %d elements, x %d", b.n, x.n)
		}
	}
	return nil
}

// BatchNormTrain: see kernels.NormOps (cuDNN's where it serves). Ours:
// Σx and Σx² in one pass, float64 sums over slices of each channel
// (dml_bn_partial, bnSplits) added in order; the statistics are float64 sums in
// a fixed order per channel; y is applied in float64 as on the CPU.
func (be *Backend) BatchNormTrain(y, mean, invstd, runMean, runVar, x, gamma, beta kernels.Buffer, n, c, hw int, eps, momentum float32) error {
	const op = "BatchNormTrain"
	yd, md, id, rm, rv, xd, gd, bd := be.buf(y), be.buf(mean), be.buf(invstd), be.buf(runMean), be.buf(runVar), be.buf(x), be.buf(gamma), be.buf(beta)
	if err := be.normCheck(op, xd, n, c, hw, []*Buffer{md, id, rm, rv, gd, bd}, yd); err != nil {
		return err
	}
	if be.bnServes(n, c, hw, float64(eps)) {
		d, err := be.bnDescFor(n, c, hw)
		if err == nil {
			be.libs.bnEps = float64(eps)
			err = d.train(be.q, be.libs.dnn, be.libs.bnMode, xd.ptr, yd.ptr, gd.ptr, bd.ptr, float64(momentum), rm.ptr, rv.ptr, float64(eps), md.ptr, id.ptr)
		}
		return be.done(op, err, n, c, hw)
	}
	splits := bnSplits(n, hw)
	ss, err := be.scratch(op, 4*c+4*c*splits, n, c, hw) // 2c float64, then 2c·splits of partial sums
	if err != nil {
		return err
	}
	defer be.release(ss)
	part := ss.ptr + uint64(8*2*c)
	k := &be.dev.k
	if err := be.launch(k.bnPartial, be.bnPartialGrid(c*splits), 1, threads, ptrAt(part), ptr(xd), i64(n), i64(c), i64(hw), i64(splits)); err != nil {
		return be.deviceErr(op, dimsString([]int{n, c, hw}), err)
	}
	if err := be.launch1D(k.bnFinish, c, ptrAt(ss.ptr), ptr(md), ptr(id), ptr(rm), ptr(rv), ptrAt(part), ptr(gd), ptr(bd),
		i64(n), i64(c), i64(hw), i64(splits), f32(eps), f32(momentum)); err != nil {
		return be.deviceErr(op, dimsString([]int{n, c, hw}), err)
	}
	return be.normApply(op, yd, xd, ss, n, c, hw)
}

// normApply queues y = scale·x + shift with the per-channel float64
// coefficients in ss (when there is anything to normalise).
func (be *Backend) normApply(op string, yd, xd *Buffer, ss *allocation, n, c, hw int) error {
	if xd.n == 0 {
		return be.record(op, n, c, hw)
	}
	return be.done(op, be.launch1D(be.dev.k.bnApply, xd.n, ptr(yd), ptr(xd), ptrAt(ss.ptr), i64(n), i64(c), i64(hw)), n, c, hw)
}

// BatchNormInfer: see kernels.NormOps.
func (be *Backend) BatchNormInfer(y, x, runMean, runVar, gamma, beta kernels.Buffer, n, c, hw int, eps float32) error {
	const op = "BatchNormInfer"
	yd, xd, rm, rv, gd, bd := be.buf(y), be.buf(x), be.buf(runMean), be.buf(runVar), be.buf(gamma), be.buf(beta)
	if err := be.normCheck(op, xd, n, c, hw, []*Buffer{rm, rv, gd, bd}, yd); err != nil {
		return err
	}
	if be.bnServes(n, c, hw, float64(eps)) {
		d, err := be.bnDescFor(n, c, hw)
		if err == nil {
			err = d.infer(be.q, be.libs.dnn, xd.ptr, yd.ptr, gd.ptr, bd.ptr, rm.ptr, rv.ptr, float64(eps))
		}
		return be.done(op, err, n, c, hw)
	}
	ss, err := be.scratch(op, 4*c, n, c, hw)
	if err != nil {
		return err
	}
	defer be.release(ss)
	if err := be.launch1D(be.dev.k.bnCoef, c, ptrAt(ss.ptr), ptr(rm), ptr(rv), ptr(gd), ptr(bd), i64(c), f32(eps)); err != nil {
		return be.deviceErr(op, dimsString([]int{n, c, hw}), err)
	}
	return be.normApply(op, yd, xd, ss, n, c, hw)
}

// BatchNormGrad: see kernels.NormOps. The two per-channel sums are
// float64 in a fixed order; dx is computed in float64 as on the CPU.
func (be *Backend) BatchNormGrad(dx, dgamma, dbeta, dy, x, mean, invstd, gamma kernels.Buffer, n, c, hw int) error {
	const op = "BatchNormGrad"
	dd, dg, db, gy, xd, md, id, gd := be.buf(dx), be.buf(dgamma), be.buf(dbeta), be.buf(dy), be.buf(x), be.buf(mean), be.buf(invstd), be.buf(gamma)
	if err := be.normCheck(op, xd, n, c, hw, []*Buffer{dg, db, md, id, gd}, gy, dd); err != nil {
		return err
	}
	if be.bnServes(n, c, hw, be.libs.bnEps) {
		d, err := be.bnDescFor(n, c, hw)
		if err == nil {
			err = d.grad(be.q, be.libs.dnn, be.libs.bnMode, xd.ptr, gy.ptr, dd.ptr, gd.ptr, dg.ptr, db.ptr, be.libs.bnEps, md.ptr, id.ptr)
		}
		return be.done(op, err, n, c, hw)
	}
	splits := bnSplits(n, hw)
	sums, err := be.scratch(op, 4*c+4*c*splits, n, c, hw) // 2c float64, then the partial sums
	if err != nil {
		return err
	}
	defer be.release(sums)
	part := sums.ptr + uint64(8*2*c)
	k := &be.dev.k
	if err := be.launch(k.bnGradPartial, be.bnPartialGrid(c*splits), 1, threads, ptrAt(part), ptr(gy), ptr(xd), ptr(md), ptr(id),
		i64(n), i64(c), i64(hw), i64(splits)); err != nil {
		return be.deviceErr(op, dimsString([]int{n, c, hw}), err)
	}
	if err := be.launch1D(k.bnGradFinish, c, ptrAt(sums.ptr), ptr(dg), ptr(db), ptrAt(part), i64(c), i64(splits)); err != nil {
		return be.deviceErr(op, dimsString([]int{n, c, hw}), err)
	}
	if xd.n == 0 {
		return be.record(op, n, c, hw)
	}
	return be.done(op, be.launch1D(k.bnGradApply, xd.n, ptr(dd), ptr(gy), ptr(xd), ptr(md), ptr(id), ptr(gd), ptrAt(sums.ptr),
		i64(n), i64(c), i64(hw)), n, c, hw)
}

var _ kernels.PadPoolOps = (*Backend)(nil)

// MaxPoolPad: see kernels.PadPoolOps.
func (be *Backend) MaxPoolPad(y, x kernels.Buffer, planes, h, w, k, stride, pad int) error {
	yd, xd := be.buf(y), be.buf(x)
	return be.padPoolOp("MaxPoolPad", be.dev.k.maxPoolPad, xd.n, yd.n, yd.n, []uint64{ptr(yd), ptr(xd)}, planes, h, w, k, stride, pad)
}

// MaxPoolPadGrad: see kernels.PadPoolOps (one thread per input pixel).
func (be *Backend) MaxPoolPadGrad(dx, dy, x kernels.Buffer, planes, h, w, k, stride, pad int) error {
	dd, gd, xd := be.buf(dx), be.buf(dy), be.buf(x)
	if dd.n != xd.n {
		return be.shapeErr("MaxPoolPadGrad", "dx has %d elements, the input %d", dd.n, xd.n)
	}
	return be.padPoolOp("MaxPoolPadGrad", be.dev.k.maxPoolPadGrad, xd.n, gd.n, xd.n, []uint64{ptr(dd), ptr(gd), ptr(xd)}, planes, h, w, k, stride, pad)
}

func (be *Backend) padPoolOp(op string, f function, xLen, yLen, work int, lead []uint64, planes, h, w, k, stride, pad int) error {
	if err := be.usable(op); err != nil {
		return err
	}
	if err := kernels.CheckPadPool("cuda."+op, xLen, yLen, planes, h, w, k, stride, pad); err != nil {
		return err
	}
	if work == 0 {
		return nil
	}
	oh, ow := kernels.ConvOut(h, w, k, stride, pad)
	args := append(lead, i64(planes), i64(h), i64(w), i64(k), i64(stride), i64(pad), i64(oh), i64(ow))
	return be.done(op, be.launch1D(f, work, args...), planes, h, w, k, stride, pad)
}

var _ kernels.LRNOps = (*Backend)(nil)

// LRN: see kernels.LRNOps (dml_lrn, one thread per element).
func (be *Backend) LRN(y, s, x kernels.Buffer, n, c, hw, size int, alpha, beta, k float32) error {
	const op = "LRN"
	yd, sd, xd := be.buf(y), be.buf(s), be.buf(x)
	if err := be.usable(op); err != nil {
		return err
	}
	if err := kernels.CheckLRN("cuda."+op, xd.n, n, c, hw, size, yd.n, sd.n); err != nil {
		return err
	}
	if xd.n == 0 {
		return nil
	}
	return be.done(op, be.launch1D(be.dev.k.lrn, xd.n, ptr(yd), ptr(sd), ptr(xd), i64(n), i64(c), i64(hw), i64(size),
		f32(alpha), f32(beta), f32(k)), n, c, hw, size)
}

// LRNGrad: see kernels.LRNOps.
func (be *Backend) LRNGrad(dx, dy, x, s kernels.Buffer, n, c, hw, size int, alpha, beta, k float32) error {
	const op = "LRNGrad"
	dd, gd, xd, sd := be.buf(dx), be.buf(dy), be.buf(x), be.buf(s)
	if err := be.usable(op); err != nil {
		return err
	}
	if err := kernels.CheckLRN("cuda."+op, xd.n, n, c, hw, size, dd.n, gd.n, sd.n); err != nil {
		return err
	}
	if xd.n == 0 {
		return nil
	}
	return be.done(op, be.launch1D(be.dev.k.lrnGrad, xd.n, ptr(dd), ptr(gd), ptr(xd), ptr(sd), i64(n), i64(c), i64(hw), i64(size),
		f32(alpha), f32(beta), f32(k)), n, c, hw, size)
}

var _ kernels.SyncNormOps = (*Backend)(nil)

// BatchNormSums: see kernels.SyncNormOps (dml_bn_partial, then the sums
// rounded per channel; our kernels, cuDNN or not).
func (be *Backend) BatchNormSums(sums, x kernels.Buffer, n, c, hw int) error {
	const op = "BatchNormSums"
	sd, xd := be.buf(sums), be.buf(x)
	if err := be.normCheck(op, xd, n, c, hw, nil); err != nil {
		return err
	}
	return be.channelSums(op, sd, be.dev.k.bnPartial, []uint64{ptr(xd)}, n, c, hw)
}

// channelSums queues partial (dml_bn_partial or dml_bn_grad_partial, its
// arguments after the partial sums lead) and dml_bn_sums_finish: each
// channel's two sums, rounded into sd (2·c).
func (be *Backend) channelSums(op string, sd *Buffer, partial function, lead []uint64, n, c, hw int) error {
	if err := be.sumsCheck(op, sd, c); err != nil {
		return err
	}
	if err := be.sumChannels(op, sd.ptr, partial, lead, n, c, hw); err != nil {
		return err
	}
	return be.record(op, n, c, hw)
}

// sumChannels is channelSums into dst (2·c floats), unrecorded.
func (be *Backend) sumChannels(op string, dst devPtr, partial function, lead []uint64, n, c, hw int) error {
	splits := bnSplits(n, hw)
	part, err := be.scratch(op, 4*c*splits, n, c, hw)
	if err != nil {
		return err
	}
	defer be.release(part)
	args := append(append([]uint64{ptrAt(part.ptr)}, lead...), i64(n), i64(c), i64(hw), i64(splits))
	if err := be.launch(partial, be.bnPartialGrid(c*splits), 1, threads, args...); err != nil {
		return be.deviceErr(op, dimsString([]int{n, c, hw}), err)
	}
	if err := be.launch1D(be.dev.k.bnSumsFinish, c, ptrAt(dst), ptrAt(part.ptr), i64(c), i64(splits)); err != nil {
		return be.deviceErr(op, dimsString([]int{n, c, hw}), err)
	}
	return nil
}

// biasGrad queues db = Σ dy over the batch and the positions, per channel
// of dy (n×c×hw): batch norm's two-stage channel sums (bnSplits slices of
// each channel, float64 in a fixed order, then rounded) in place of
// cudnnConvolutionBackwardBias, whose kernel (calc_bias_diff_nchw_packed)
// gives a channel one block: 1.32 ms of LeNet-5's 2.2 ms step at batch
// 1024 (6 and 16 channels; ncu on an H200, bench/gpu/step-run.sh,
// 2026-11-27).
func (be *Backend) biasGrad(op string, db, dy devPtr, n, c, hw int) error {
	sums, err := be.scratch(op, 2*c, n, c, hw)
	if err != nil {
		return err
	}
	defer be.release(sums)
	if err := be.sumChannels(op, sums.ptr, be.dev.k.bnPartial, []uint64{ptrAt(dy)}, n, c, hw); err != nil {
		return err
	}
	return be.done(op, be.q.dtod(db, sums.ptr, 4*c), n, c, hw)
}

// sumsCheck refuses a sums buffer that is not 2·c long.
func (be *Backend) sumsCheck(op string, sd *Buffer, c int) error {
	if sd.n != 2*c {
		return be.shapeErr(op, "sums has %d elements, want %d", sd.n, 2*c)
	}
	return nil
}

// BatchNormTrainSums: see kernels.SyncNormOps.
func (be *Backend) BatchNormTrainSums(y, mean, invstd, runMean, runVar, x, gamma, beta, sums kernels.Buffer, count, n, c, hw int, eps, momentum float32) error {
	const op = "BatchNormTrainSums"
	yd, md, id, rm, rv, xd, gd, bd, sd := be.buf(y), be.buf(mean), be.buf(invstd), be.buf(runMean), be.buf(runVar), be.buf(x), be.buf(gamma), be.buf(beta), be.buf(sums)
	if err := be.normCheck(op, xd, n, c, hw, []*Buffer{md, id, rm, rv, gd, bd}, yd); err != nil {
		return err
	}
	if err := be.sumsCheck(op, sd, c); err != nil {
		return err
	}
	ss, err := be.scratch(op, 4*c, n, c, hw) // 2c float64
	if err != nil {
		return err
	}
	defer be.release(ss)
	if err := be.launch1D(be.dev.k.bnFinishSums, c, ptrAt(ss.ptr), ptr(md), ptr(id), ptr(rm), ptr(rv), ptr(sd), ptr(gd), ptr(bd),
		i64(count), i64(c), f32(eps), f32(momentum)); err != nil {
		return be.deviceErr(op, dimsString([]int{n, c, hw}), err)
	}
	return be.normApply(op, yd, xd, ss, n, c, hw)
}

// BatchNormGradSums: see kernels.SyncNormOps.
func (be *Backend) BatchNormGradSums(sums, dy, x, mean, invstd kernels.Buffer, n, c, hw int) error {
	const op = "BatchNormGradSums"
	sd, gy, xd, md, id := be.buf(sums), be.buf(dy), be.buf(x), be.buf(mean), be.buf(invstd)
	if err := be.normCheck(op, xd, n, c, hw, []*Buffer{md, id}, gy); err != nil {
		return err
	}
	return be.channelSums(op, sd, be.dev.k.bnGradPartial, []uint64{ptr(gy), ptr(xd), ptr(md), ptr(id)}, n, c, hw)
}

// BatchNormGradInput: see kernels.SyncNormOps.
func (be *Backend) BatchNormGradInput(dx, dy, x, mean, invstd, gamma, sums kernels.Buffer, count, n, c, hw int) error {
	const op = "BatchNormGradInput"
	dd, gy, xd, md, id, gd, sd := be.buf(dx), be.buf(dy), be.buf(x), be.buf(mean), be.buf(invstd), be.buf(gamma), be.buf(sums)
	if err := be.normCheck(op, xd, n, c, hw, []*Buffer{md, id, gd}, gy, dd); err != nil {
		return err
	}
	if err := be.sumsCheck(op, sd, c); err != nil {
		return err
	}
	if xd.n == 0 {
		return be.record(op, n, c, hw)
	}
	return be.done(op, be.launch1D(be.dev.k.bnGradInput, xd.n, ptr(dd), ptr(gy), ptr(xd), ptr(md), ptr(id), ptr(gd), ptr(sd),
		i64(count), i64(n), i64(c), i64(hw)), n, c, hw)
}
