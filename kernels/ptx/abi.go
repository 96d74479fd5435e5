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

	// GEMM, fp32, smaller tiles: dml_sgemm64_{nn,nt,tn,tt} (128×64 tiles
	// despite the name: faster than 64×64 on the H200), same parameters and
	// grid rule with these sizes; for products with few 128×128 tiles (see
	// PickGemm).
	Gemm64BlockM  = 128
	Gemm64BlockN  = 64
	Gemm64Threads = 256

	// GEMM, fp32, one side of C at most SkinnyMax wide and k ≥ SkinnyMinK:
	// dml_sgemm_skinnyn_* (n small) and dml_sgemm_skinnym_* (m small), same
	// parameters, SkinnyThreads per block, a 1-D grid (Gemm.Grid).
	SkinnyMax     = 16
	SkinnyMinK    = 256
	SkinnyThreads = 256

	// GEMM, TF32 tensor cores: dml_sgemm_tf32_{nn,nt,tn,tt}, in module
	// gemm_tf32 (compute_80), devices of compute capability ≥ TF32MinCC/10.
	TF32BlockM = 128
	TF32BlockN = 128
	// TF32MinK is the shortest k PickGemm gives the TF32 kernel (below
	// it the tensor cores have too little to do: 1024×1024×10 ran at 2226
	// GFLOP/s against fp32's 2573 on an H200).
	TF32MinK    = 32
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
	// MaxGridX is CUDA's limit on gridDim.x.
	MaxGridX = 1<<31 - 1
)

// GemmFamilies are the name prefixes of the fp32 GEMM kernels PickGemm can
// return; each family has the suffixes nn, nt, tn, tt.
var GemmFamilies = []string{"dml_sgemm_", "dml_sgemm64_", "dml_sgemm_skinnyn_", "dml_sgemm_skinnym_"}

// Gemm names a GEMM kernel and its launch shape.
type Gemm struct {
	Name           string
	BlockM, BlockN int
	Threads        int
	// Skinny is 'n' or 'm' for the skinny kernels (which side of C is
	// small), 0 for the tiled ones; Wide is then how many indices of the
	// other side a block owns.
	Skinny byte
	Wide   int
	// TF32 marks the tensor-core kernel (module gemm_tf32).
	TF32 bool
}

// PickGemm returns the kernel for C = op(A)·op(B) with C m×n on a device
// with sms multiprocessors: the skinny kernels when one side of C is at
// most SkinnyMax and k ≥ SkinnyMinK (split K: 2.4–2.6× the tiled kernels
// on the MLP's 10-class layer); else, when TF32 is asked for (the caller
// checks TF32MinCC) and the product fills the tensor-core kernel's tiles
// (both sides of C at least a tile, k at least TF32MinK), TF32; else the
// 128×128 tiles when they give at least one block per multiprocessor,
// else the 128×64 ones (more blocks for small products). TF32 leaves the
// rest to the float32 kernels, which are faster there and more exact (on
// an H200: a 10-wide product 840 against 329 GFLOP/s; a convolution's
// 16×131072×144 forward product 1.08 against 3.1 ms; its split-K weight
// gradient ~1 against 5–10 ms): TF32 never slower than fp32. The choice
// depends only on the shape and the device, so results are deterministic
// for a shape on a device.
func PickGemm(transA, transB, tf32 bool, m, n, k, sms int) Gemm {
	suffix := "_" + map[bool]string{false: "n", true: "t"}[transA] + map[bool]string{false: "n", true: "t"}[transB]
	skinny := k >= SkinnyMinK && (n <= SkinnyMax || m <= SkinnyMax)
	if tf32 && !skinny && m >= TF32BlockM && n >= TF32BlockN && k >= TF32MinK {
		return Gemm{Name: "dml_sgemm_tf32" + suffix, BlockM: TF32BlockM, BlockN: TF32BlockN, Threads: TF32Threads, TF32: true}
	}
	if skinny {
		// The wide operand is contiguous along the wide side (8 indices per
		// block, one 32-byte sector) or along k (one index per block).
		side, contig := byte('n'), transA
		if n > SkinnyMax {
			side, contig = 'm', !transB
		}
		w := 1
		if contig {
			w = 8
		}
		return Gemm{Name: "dml_sgemm_skinny" + string(side) + suffix, Threads: SkinnyThreads, Skinny: side, Wide: w}
	}
	tiles := ceilDiv(m, GemmBlockM) * ceilDiv(n, GemmBlockN)
	if tiles >= sms {
		return Gemm{Name: "dml_sgemm" + suffix, BlockM: GemmBlockM, BlockN: GemmBlockN, Threads: GemmThreads}
	}
	return Gemm{Name: "dml_sgemm64" + suffix, BlockM: Gemm64BlockM, BlockN: Gemm64BlockN, Threads: Gemm64Threads}
}

// Grid returns the grid (x, y) for the GEMM g on C m×n: for the tiled
// kernels one block per tile, y clamped to MaxGridY; for the skinny ones
// one block per Wide indices of the wide side, clamped to MaxGridX (the
// kernels loop over the rest).
func (g Gemm) Grid(m, n int) (x, y int) {
	switch g.Skinny {
	case 'n':
		return min(ceilDiv(m, g.Wide), MaxGridX), 1
	case 'm':
		return min(ceilDiv(n, g.Wide), MaxGridX), 1
	}
	return ceilDiv(n, g.BlockN), min(ceilDiv(m, g.BlockM), MaxGridY)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
