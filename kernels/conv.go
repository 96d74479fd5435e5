package kernels

import (
	"errors"
	"fmt"
	"math"
)

// ConvOps is the optional op set of convolutional networks, detected on a
// Backend with ConvOf (as HostAllocator is): the image-to-column
// transforms a convolution runs its GEMMs on, and pooling. Images are
// batches of n samples of c channels of h×w, row-major (NCHW, PyTorch's
// layout), contiguous. Shapes are checked as for the other ops (ErrShape,
// outputs untouched); every output is overwritten, never accumulated.
type ConvOps interface {
	// Im2col writes the columns a k×k convolution with this stride and
	// zero padding reads from the n samples of x (n×c×h×w), side by side:
	// cols is a (c·k·k) × (n·oh·ow) matrix whose row (ci·k + ki)·k + kj
	// holds, at column s·oh·ow + oy·ow + ox,
	// x[s][ci][oy·stride+ki−pad][ox·stride+kj−pad] (0 outside the image);
	// oh, ow = ConvOut(h, w, k, stride, pad). The whole batch's
	// convolution is then one GEMM, W (out × c·k·k) · cols, whose output
	// out × n·oh·ow Transpose01 turns into NCHW.
	Im2col(cols, x Buffer, n, c, h, w, k, stride, pad int) error
	// Col2im is Im2col's adjoint: dx (n×c×h×w) = the sum, over every
	// column entry, of cols scattered back to the pixel it was read from.
	Col2im(dx, cols Buffer, n, c, h, w, k, stride, pad int) error
	// Transpose01 sets dst (b × a × inner) to src (a × b × inner) with its
	// first two axes swapped: dst[j][i][:] = src[i][j][:]. dst and src must
	// not overlap.
	Transpose01(dst, src Buffer, a, b, inner int) error
	// MaxPool sets y (planes×oh×ow) to the maximum of each k×k window of
	// x (planes×h×w) at this stride, without padding (NaN is never the
	// maximum unless the whole window is NaN).
	MaxPool(y, x Buffer, planes, h, w, k, stride int) error
	// MaxPoolGrad sets dx to dy routed to each window's maximum (the
	// first, in row-major order, on ties) and 0 elsewhere; windows that
	// overlap add up.
	MaxPoolGrad(dx, dy, x Buffer, planes, h, w, k, stride int) error
	// AvgPool sets y to the mean of each k×k window of x.
	AvgPool(y, x Buffer, planes, h, w, k, stride int) error
	// AvgPoolGrad sets dx to dy/(k·k) spread over each window.
	AvgPoolGrad(dx, dy Buffer, planes, h, w, k, stride int) error
}

// ConvOf returns b's ConvOps, and false when the backend (or the one a
// decorator such as trace.Backend wraps) has none.
func ConvOf(b Backend) (ConvOps, bool) { return optional[ConvOps](b) }

// optional returns b as the optional op set T when the backend itself (not
// only a decorator that passes T through, such as trace.Backend) has it.
func optional[T any](b Backend) (T, bool) {
	var zero T
	if _, ok := Innermost(b).(T); !ok {
		return zero, false
	}
	t, ok := b.(T)
	return t, ok
}

// DirectISAReporter is a backend whose direct convolutions run on a
// named instruction set (e.g. "k×k on AVX-512", "AVX2"), for the line
// that says which convolutions dml's kernels run; their results are the
// same bits on each.
type DirectISAReporter interface {
	DirectISA() string
}

// Innermost is the backend that b's decorators (those with an Unwrap
// method, such as trace.Backend) wrap, or b itself.
func Innermost(b Backend) Backend {
	for {
		u, ok := b.(interface{ Unwrap() Backend })
		if !ok {
			return b
		}
		b = u.Unwrap()
	}
}

// ErrNoConv is returned for a convolutional network on a backend without
// ConvOps.
var ErrNoConv = errors.New("the backend has no convolution ops")

// ConvOut is the output size of a k×k window sliding over h×w at stride
// with padding pad on every side (0 when the window does not fit).
func ConvOut(h, w, k, stride, pad int) (oh, ow int) {
	if k <= 0 || stride <= 0 || pad < 0 || h+2*pad < k || w+2*pad < k {
		return 0, 0
	}
	return (h+2*pad-k)/stride + 1, (w+2*pad-k)/stride + 1
}

// CheckConv validates the shape arguments of Im2col and Col2im against
// the lengths of the image (xLen) and the columns (colsLen), without
// overflowing; op names the caller for the error.
func CheckConv(op string, xLen, colsLen, n, c, h, w, k, stride, pad int) error {
	oh, ow := ConvOut(h, w, k, stride, pad)
	switch {
	case n < 0 || c <= 0 || h <= 0 || w <= 0 || k <= 0 || stride <= 0 || pad < 0 || pad >= k:
		return fmt.Errorf("%s: n %d, c %d, %d×%d, kernel %d, stride %d, pad %d: bad dimensions: %w", op, n, c, h, w, k, stride, pad, ErrShape)
	case oh == 0:
		return fmt.Errorf("%s: a %d×%d kernel does not fit a %d×%d image padded by %d: %w", op, k, k, h, w, pad, ErrShape)
	}
	img, ok1 := mulAll(n, c, h, w)
	col, ok2 := mulAll(n, c, k, k, oh, ow)
	switch {
	case !ok1 || !ok2:
		return fmt.Errorf("%s: n %d × c %d × %d×%d (kernel %d): too large: %w", op, n, c, h, w, k, ErrShape)
	case xLen != img:
		return fmt.Errorf("%s: the image has %d elements, want %d×%d×%d×%d = %d: %w", op, xLen, n, c, h, w, img, ErrShape)
	case colsLen != col:
		return fmt.Errorf("%s: cols has %d elements, want %d×(%d·%d·%d)×(%d·%d) = %d: %w", op, colsLen, n, c, k, k, oh, ow, col, ErrShape)
	}
	return nil
}

// CheckTranspose validates Transpose01's shapes: both buffers a·b·inner
// long (dstLen and srcLen), without overflowing.
func CheckTranspose(op string, dstLen, srcLen, a, b, inner int) error {
	all, ok := mulAll(a, b, inner)
	if a < 0 || b < 0 || inner < 0 || !ok || dstLen != all || srcLen != all {
		return fmt.Errorf("%s: dst has %d elements and src %d, want %d×%d×%d: %w", op, dstLen, srcLen, a, b, inner, ErrShape)
	}
	return nil
}

// CheckPool validates the shape arguments of the pooling ops: the input's
// length (xLen) and the output's (yLen).
func CheckPool(op string, xLen, yLen, planes, h, w, k, stride int) error {
	oh, ow := ConvOut(h, w, k, stride, 0)
	switch {
	case planes < 0 || h <= 0 || w <= 0 || k <= 0 || stride <= 0:
		return fmt.Errorf("%s: %d planes of %d×%d, window %d, stride %d: bad dimensions: %w", op, planes, h, w, k, stride, ErrShape)
	case oh == 0:
		return fmt.Errorf("%s: a %d×%d window does not fit %d×%d: %w", op, k, k, h, w, ErrShape)
	}
	in, ok := mulAll(planes, h, w)
	if !ok || xLen != in || yLen != planes*oh*ow {
		return fmt.Errorf("%s: %d and %d elements for %d planes of %d×%d pooled %d×%d to %d×%d: %w", op, xLen, yLen, planes, h, w, k, k, oh, ow, ErrShape)
	}
	return nil
}

// mulAll is the product of non-negative factors, and false on overflow.
func mulAll(f ...int) (int, bool) {
	p := 1
	for _, x := range f {
		if x < 0 || x != 0 && p > math.MaxInt/x {
			return 0, false
		}
		p *= x
	}
	return p, true
}

// NormOps is the optional op set of batch normalisation over a batch of
// n samples of c channels of hw values each (NCHW), per channel, as
// PyTorch's BatchNorm2d computes it, detected with NormOf. Every output is
// overwritten.
type NormOps interface {
	// BatchNormTrain normalises with the batch's own statistics: for each
	// channel, μ = mean, σ² = the biased variance over the n·hw values,
	// y = γ·(x − μ)/√(σ² + eps) + β; it writes μ and 1/√(σ² + eps) into
	// mean and invstd (c each) for the backward pass, and updates the
	// running statistics: runMean ← (1−m)·runMean + m·μ, runVar ←
	// (1−m)·runVar + m·σ²·N/(N−1) with N = n·hw (the unbiased variance; σ²
	// when N is 1).
	BatchNormTrain(y, mean, invstd, runMean, runVar, x, gamma, beta Buffer, n, c, hw int, eps, momentum float32) error
	// BatchNormInfer normalises with the running statistics:
	// y = γ·(x − runMean)/√(runVar + eps) + β.
	BatchNormInfer(y, x, runMean, runVar, gamma, beta Buffer, n, c, hw int, eps float32) error
	// BatchNormGrad is BatchNormTrain's backward pass given the mean and
	// invstd it wrote: dγ = Σ dy·x̂, dβ = Σ dy, and dx = γ·invstd·(dy −
	// dβ/N − x̂·dγ/N), x̂ = (x − μ)·invstd, per channel.
	BatchNormGrad(dx, dgamma, dbeta, dy, x, mean, invstd, gamma Buffer, n, c, hw int) error
}

// NormOf returns b's NormOps (looking through decorators, as ConvOf).
func NormOf(b Backend) (NormOps, bool) { return optional[NormOps](b) }

// NormReluOps is an optional op set (NormReluOf): a training batch norm
// and the ReLU on its output as one op, where a library fuses them
// (oneDNN's batch norm with its ReLU flag), saving the ReLU's pass over
// the data both ways. NormRelu reports whether the ops run: a backend has
// the methods always and the library only where it loaded. The model
// uses them for a batch norm whose output only a ReLU in place reads.
type NormReluOps interface {
	NormRelu() bool
	// BatchNormReluTrain is BatchNormTrain with y = max(that y, 0).
	BatchNormReluTrain(y, mean, invstd, runMean, runVar, x, gamma, beta Buffer, n, c, hw int, eps, momentum float32) error
	// BatchNormReluGrad is BatchNormGrad given the gradient dy of the
	// ReLU's output y (from BatchNormReluTrain with the same mean): dy
	// where y > 0, else 0, through the batch norm's backward pass.
	BatchNormReluGrad(dx, dgamma, dbeta, dy, y, x, mean, invstd, gamma Buffer, n, c, hw int) error
}

// NormReluOf returns b's NormReluOps where they run (NormRelu), looking
// through decorators.
func NormReluOf(b Backend) (NormReluOps, bool) {
	o, ok := optional[NormReluOps](b)
	return o, ok && o.NormRelu()
}

// CheckNorm validates batch-norm shapes: x of n·c·hw, per-channel vectors
// of c (their lengths in perChannel).
func CheckNorm(op string, xLen, n, c, hw int, perChannel ...int) error {
	all, ok := mulAll(n, c, hw)
	if n < 0 || c <= 0 || hw <= 0 || !ok || xLen != all {
		return fmt.Errorf("%s: %d elements for n %d × c %d × hw %d: %w", op, xLen, n, c, hw, ErrShape)
	}
	for i, l := range perChannel {
		if l != c {
			return fmt.Errorf("%s: per-channel argument %d has %d elements, want %d: %w", op, i, l, c, ErrShape)
		}
	}
	return nil
}

// DirectConvOps is an optional op set (DirectConvOf): a stride-1 k×k
// convolution with zero padding computed directly, without Im2col's
// columns, for the shapes ConvSupports accepts. The model uses it where it
// is there and falls back to Im2col and GEMM elsewhere.
type DirectConvOps interface {
	// ConvSupports reports whether Conv and ConvFilter run a stride-1 k×k
	// convolution with zero padding pad of c input channels of h×w into o.
	ConvSupports(c, h, w, o, k, pad int) bool
	// Conv sets y (n×o×oh×ow, oh = h+2·pad−k+1, ow = w+2·pad−k+1) to the
	// convolution of x (n×c×h×w) with the kernels in wt, laid out
	// [c][ki·k+kj][o] (PyTorch's o×c×k×k weight through
	// Transpose01(wt, weight, o, c·k·k, 1)), plus bias[oc] when bias is not
	// nil: y[s][oc][i][j] = Σ_ci Σ_ki,kj wt[ci][ki·k+kj][oc]·
	// x[s][ci][i+ki−pad][j+kj−pad] (+ bias[oc]). An unsupported shape is
	// an error wrapping ErrShape.
	Conv(y, x, wt, bias Buffer, n, c, h, w, o, k, pad int) error
	// ConvFilter sets dw (o×c×k×k, PyTorch's layout) and db (o, when not
	// nil) to that convolution's weight and bias gradients over the batch,
	// given its output's gradient dy (n×o×oh×ow): dw[oc][ci][ki][kj] =
	// Σ_s Σ_i,j dy[s][oc][i][j]·x[s][ci][i+ki−pad][j+kj−pad], db[oc] =
	// Σ_s Σ_i,j dy[s][oc][i][j]. Where x holds an Inf or a NaN, more of dw
	// may come out NaN than the sum says (the cpu backend's k×k kernel
	// multiplies 0 by pixels outside the sum); a step with such an input
	// is lost either way.
	ConvFilter(dw, db, x, dy Buffer, n, c, h, w, o, k, pad int) error
}

// DirectConvOf returns b's DirectConvOps (looking through decorators).
func DirectConvOf(b Backend) (DirectConvOps, bool) { return optional[DirectConvOps](b) }

// DirectOut is the output side of a stride-1 k×k convolution with
// padding pad of an h×w image: h+2·pad−k+1 × w+2·pad−k+1.
func DirectOut(h, w, k, pad int) (oh, ow int) { return h + 2*pad - k + 1, w + 2*pad - k + 1 }

// CheckDirectConv validates the direct ops' lengths: y (or dy) of
// n·o·oh·ow, x of n·c·h·w, the weights of c·k·k·o, the bias (or its
// gradient) of o, or bLen < 0 for none.
func CheckDirectConv(op string, yLen, xLen, wLen, bLen, n, c, h, w, o, k, pad int) error {
	oh, ow := DirectOut(h, w, k, pad)
	ys, ok1 := mulAll(n, o, oh, ow)
	xs, ok2 := mulAll(n, c, h, w)
	ws, ok3 := mulAll(c, k, k, o)
	if n < 0 || c <= 0 || h <= 0 || w <= 0 || o <= 0 || k <= 0 || pad < 0 || oh <= 0 || ow <= 0 || !ok1 || !ok2 || !ok3 ||
		yLen != ys || xLen != xs || wLen != ws || bLen >= 0 && bLen != o {
		return fmt.Errorf("%s: y %d, x %d, weights %d, bias %d elements for n %d, %d→%d channels of %d×%d, kernel %d, padding %d: %w",
			op, yLen, xLen, wLen, bLen, n, c, o, h, w, k, pad, ErrShape)
	}
	return nil
}

// UnsupportedConv is the error of a direct op on a shape it does not run.
func UnsupportedConv(op string, c, h, w, o, k, pad int) error {
	return fmt.Errorf("%s: %d→%d channels of %d×%d, kernel %d, padding %d is not a shape it runs (ConvSupports): %w", op, c, o, h, w, k, pad, ErrShape)
}

// PadPoolOps is the optional op set (PadPoolOf) of max pooling with
// padding, as PyTorch's MaxPool2d(k, stride, padding): each window
// reaches pad cells past every edge, where nothing is (−∞), so its
// maximum is over the cells inside the image (pad ≤ k/2 keeps one in
// every window); the output is oh = (h + 2·pad − k)/stride + 1 by ow.
// The maximum and the gradient's routing are MaxPool's (the first
// maximum in row-major order; NaN wins nothing unless all are NaN).
type PadPoolOps interface {
	MaxPoolPad(y, x Buffer, planes, h, w, k, stride, pad int) error
	MaxPoolPadGrad(dx, dy, x Buffer, planes, h, w, k, stride, pad int) error
}

// PadPoolOf returns b's PadPoolOps (looking through decorators).
func PadPoolOf(b Backend) (PadPoolOps, bool) { return optional[PadPoolOps](b) }

// LibPoolOps is an optional op set (LibPoolOf): a pooling layer's ops with
// the batch and the channels apart (x n×c×h×w), for a backend whose
// library pools data in a layout of its own (oneDNN's blocked channels,
// as a convolution, batch norm and ReLU leave it), where dml's kernels
// would first reorder it to plain and the next layer reorder it back.
// Where x is plain, or no library serves, the backend runs its own
// kernels (ConvOps' MaxPool and AvgPool, PadPoolOps' MaxPoolPad) with
// their bits. max chooses the maximum (padding pad, at most k/2, as
// PadPoolOps) or the mean (pad 0).
type LibPoolOps interface {
	LibPool() bool
	Pool(y, x Buffer, max bool, n, c, h, w, k, stride, pad int) error
	// PoolGrad sets dx to the gradient of x given dy; x is the input
	// Pool was given, unchanged since.
	PoolGrad(dx, dy, x Buffer, max bool, n, c, h, w, k, stride, pad int) error
}

// LibPoolOf returns b's LibPoolOps where a library serves them (LibPool),
// looking through decorators.
func LibPoolOf(b Backend) (LibPoolOps, bool) {
	o, ok := optional[LibPoolOps](b)
	if !ok {
		return nil, false
	}
	inner, _ := Innermost(b).(LibPoolOps)
	return o, inner.LibPool()
}

// CheckPadPool validates a padded pool's shapes: x of planes·h·w, y of
// planes·oh·ow, a positive kernel and stride, 0 ≤ pad ≤ k/2.
func CheckPadPool(op string, xLen, yLen, planes, h, w, k, stride, pad int) error {
	if planes < 0 || h <= 0 || w <= 0 || k <= 0 || stride <= 0 || pad < 0 || 2*pad > k {
		return fmt.Errorf("%s: planes %d, %d×%d, kernel %d, stride %d, pad %d: bad dimensions (0 ≤ pad ≤ kernel/2): %w", op, planes, h, w, k, stride, pad, ErrShape)
	}
	oh, ow := ConvOut(h, w, k, stride, pad)
	if oh == 0 {
		return fmt.Errorf("%s: a %d×%d window does not fit a %d×%d image padded by %d: %w", op, k, k, h, w, pad, ErrShape)
	}
	img, ok1 := mulAll(planes, h, w)
	out, ok2 := mulAll(planes, oh, ow)
	switch {
	case !ok1 || !ok2:
		return fmt.Errorf("%s: planes %d × %d×%d: too large: %w", op, planes, h, w, ErrShape)
	case xLen != img || yLen != out:
		return fmt.Errorf("%s: x has %d elements and y %d, want %d and %d: %w", op, xLen, yLen, img, out, ErrShape)
	}
	return nil
}

// LRNOps is the optional op set (LRNOf) of local response normalisation
// across channels, as PyTorch's LocalResponseNorm(size, alpha, beta, k)
// computes it, for n samples of c channels of hw values (NCHW): y = x /
// s^β with s = k + α/size · Σ x² over the channels c − ⌊size/2⌋ …
// c + ⌊(size−1)/2⌋ that exist (PyTorch pads with zeros). Every output is
// overwritten.
type LRNOps interface {
	// LRN writes y and s (x's shape: the backward pass's).
	LRN(y, s, x Buffer, n, c, hw, size int, alpha, beta, k float32) error
	// LRNGrad is LRN's backward pass given the s it wrote: dx_j = dy_j ·
	// s_j^−β − (2αβ/size) · x_j · Σ dy_i·x_i·s_i^(−β−1) over the channels i
	// whose window holds j.
	LRNGrad(dx, dy, x, s Buffer, n, c, hw, size int, alpha, beta, k float32) error
}

// LRNOf returns b's LRNOps (looking through decorators).
func LRNOf(b Backend) (LRNOps, bool) { return optional[LRNOps](b) }

// CheckLRN validates local response normalisation's shapes: every buffer
// of n·c·hw (their lengths in same), a window of at least one channel.
func CheckLRN(op string, xLen, n, c, hw, size int, same ...int) error {
	all, ok := mulAll(n, c, hw)
	if n < 0 || c <= 0 || hw <= 0 || size <= 0 || !ok || xLen != all {
		return fmt.Errorf("%s: %d elements for n %d × c %d × hw %d, size %d: %w", op, xLen, n, c, hw, size, ErrShape)
	}
	for i, l := range same {
		if l != xLen {
			return fmt.Errorf("%s: argument %d has %d elements, want %d: %w", op, i, l, xLen, ErrShape)
		}
	}
	return nil
}

// SyncNormOps is the optional op set (SyncNormOf) of batch normalisation
// over several ranks' batches at once (PyTorch's SyncBatchNorm): each
// rank's per-channel sums, which the caller sums over the ranks, then the
// normalisation and the input gradient from those sums and the values
// they cover (count). Every output is overwritten.
type SyncNormOps interface {
	// BatchNormSums writes sums[ch] = Σx and sums[c+ch] = Σx² over this
	// batch's n·hw values of channel ch (float64 sums, rounded).
	BatchNormSums(sums, x Buffer, n, c, hw int) error
	// BatchNormTrainSums is BatchNormTrain with the statistics of count
	// values whose BatchNormSums (over every rank) are sums: μ = Σx/count,
	// σ² = max(Σx²/count − μ², 0); mean, invstd, the running statistics
	// (the unbiased σ²·count/(count − 1)) and y as BatchNormTrain writes
	// them.
	BatchNormTrainSums(y, mean, invstd, runMean, runVar, x, gamma, beta, sums Buffer, count, n, c, hw int, eps, momentum float32) error
	// BatchNormGradSums writes sums[ch] = Σdy and sums[c+ch] = Σdy·x̂ over
	// this batch (x̂ = (x − mean)·invstd): its dβ and dγ.
	BatchNormGradSums(sums, dy, x, mean, invstd Buffer, n, c, hw int) error
	// BatchNormGradInput writes dx = γ·invstd·(dy − Σdy/count −
	// x̂·Σdy·x̂/count) from the BatchNormGradSums over every rank.
	BatchNormGradInput(dx, dy, x, mean, invstd, gamma, sums Buffer, count, n, c, hw int) error
}

// SyncNormOf returns b's SyncNormOps (looking through decorators).
func SyncNormOf(b Backend) (SyncNormOps, bool) { return optional[SyncNormOps](b) }
