// Package inflate bounds what a compressed input (gzip, a deflated .npz
// entry) may claim or deliver, relative to its compressed size, so that a
// small hostile file (a "zip bomb") cannot make a rank allocate gigabytes.
//
// Deflate cannot expand more than about 1032:1, so a claim above that is a
// lie. Real data compresses far less: Fashion-MNIST's images 1.2–4:1, LIBSVM
// text 3–10:1, float32 weights barely at all. Limit allows MaxRatio:1 — an
// order of magnitude above real data, an order below deflate's limit — and
// always at least Floor bytes, so tiny files of zeros still load. A file
// that really is more compressible can be decompressed first (gunzip, or
// numpy.savez instead of savez_compressed): uncompressed input is bounded by
// its own size.
package inflate

import "fmt"

const (
	// MaxRatio is the largest decompressed:compressed ratio accepted.
	MaxRatio = 128
	// DeflateMaxRatio is deflate's own limit (258 bytes from 2 bits, about
	// 1032:1), quoted in error messages.
	DeflateMaxRatio = 1032
	// Floor is the decompressed size always accepted, whatever the ratio.
	Floor = 32 << 20
)

// Limit is the most bytes that compressed bytes of deflate data may
// decompress to here: max(Floor, MaxRatio × compressed).
func Limit(compressed int64) int64 {
	if compressed > (1<<62)/MaxRatio {
		return 1 << 62
	}
	return max(Floor, MaxRatio*compressed)
}

// Reason explains a refused size, for the end of an error message.
func Reason(compressed int64) string {
	return fmt.Sprintf("%d compressed bytes may decompress to at most %d here (%d:1, above %d MiB; real data compresses < 10:1, deflate itself cannot exceed ~%d:1): decompress the file first if it is genuine",
		compressed, Limit(compressed), MaxRatio, Floor>>20, DeflateMaxRatio)
}
