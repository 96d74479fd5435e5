package blas

// HaveCgo tells the tests whether this build can load a library at all.
const HaveCgo = haveCgo

// SetOneDNNGemmMin sets the product size from which oneDNN serves Gemm
// (for backends opened afterwards) and returns the previous one.
func SetOneDNNGemmMin(n int) int {
	old := oneDNNGemmMin
	oneDNNGemmMin = n
	return old
}

// OneDNNFix is oneDNNFix, for its test.
var OneDNNFix = oneDNNFix
