package ptx

// Launch constants of the kernels in kernels/cu (ABI.md has the contract).
// They mirror the template arguments in gemm.cu and gemm_tf32.cu and the
// DML_RED_THREADS of common.cuh; a kernel launched with another block size
// traps (a launch error, never a wrong answer).
const (
	// GEMM, fp32, large tiles: dml_sgemm_{nn,nt,tn,tt}. Grid =
	// (ceil(n/GemmBlockN), min(ceil(m/GemmBlockM), MaxGridY)), block =
	// GemmThreads, no dynamic shared memory.
	GemmBlockM  = 128
	GemmBlockN  = 128
	GemmThreads = 256

	// GEMM, fp32, small tiles: dml_sgemm64_{nn,nt,tn,tt}, same parameters
	// and grid rule with these sizes; for products with few 128×128 tiles
	// (see PickGemm).
	Gemm64BlockM  = 64
	Gemm64BlockN  = 64
	Gemm64Threads = 256

	// GEMM, TF32 tensor cores: dml_sgemm_tf32_{nn,nt,tn,tt}, in module
	// gemm_tf32 (compute_80), devices of compute capability ≥ TF32MinCC/10.
	TF32BlockM  = 128
	TF32BlockN  = 128
	TF32Threads = 256
	TF32MinCC   = 80

	// RedThreads is the block size of the row kernels (dml_softmax_xent,
	// dml_predict) and of the one-block reductions (dml_stats, dml_dot_*).
	RedThreads = 256
	// DotMaxBlocks bounds dml_dot_partial's grid (its partial buffer holds
	// one float64 per block).
	DotMaxBlocks = 1024
	// MaxGridY is CUDA's limit on gridDim.y (and z); every 2-D kernel loops
	// over the tiles beyond it, so clamping the grid is always correct.
	MaxGridY = 65535
)

// Gemm names a GEMM kernel and its launch shape.
type Gemm struct {
	Name           string
	BlockM, BlockN int
	Threads        int
}

// PickGemm returns the kernel for C = op(A)·op(B) with C m×n on a device
// with sms multiprocessors: TF32 when asked for (the caller checks
// TF32MinCC), else the 128×128 tiles when they give at least one block per
// multiprocessor, else the 64×64 ones (more blocks for small products). The
// choice depends only on the shape and the device, so results are
// deterministic for a shape on a device.
func PickGemm(transA, transB, tf32 bool, m, n, sms int) Gemm {
	suffix := "_" + map[bool]string{false: "n", true: "t"}[transA] + map[bool]string{false: "n", true: "t"}[transB]
	if tf32 {
		return Gemm{"dml_sgemm_tf32" + suffix, TF32BlockM, TF32BlockN, TF32Threads}
	}
	tiles := ceilDiv(m, GemmBlockM) * ceilDiv(n, GemmBlockN)
	if tiles >= sms {
		return Gemm{"dml_sgemm" + suffix, GemmBlockM, GemmBlockN, GemmThreads}
	}
	return Gemm{"dml_sgemm64" + suffix, Gemm64BlockM, Gemm64BlockN, Gemm64Threads}
}

// Grid returns the grid (x, y) for the GEMM g on C m×n: one block per tile,
// y clamped to MaxGridY (the kernel loops over the rest).
func (g Gemm) Grid(m, n int) (x, y int) {
	return ceilDiv(n, g.BlockN), min(ceilDiv(m, g.BlockM), MaxGridY)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
