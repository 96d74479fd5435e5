package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dml-project/dml/trainer/data"
)

// TestSourceFingerprint: ranks that open the same IDX files agree (whichever
// half of a split each holds), a changed pixel is noticed, and a *data.Dense
// keeps DenseFingerprint's hash.
func TestSourceFingerprint(t *testing.T) {
	dir := t.TempDir()
	idx := func(dims []int, b []byte) []byte {
		h := []byte{0, 0, 8, byte(len(dims))}
		for _, d := range dims {
			h = append(h, byte(d>>24), byte(d>>16), byte(d>>8), byte(d))
		}
		return append(h, b...)
	}
	px := make([]byte, 20*3*3)
	for i := range px {
		px[i] = byte(i)
	}
	lab := make([]byte, 20)
	for i := range lab {
		lab[i] = byte(i % 3)
	}
	ip, lp := filepath.Join(dir, "img"), filepath.Join(dir, "lab")
	os.WriteFile(ip, idx([]int{20, 3, 3}, px), 0o644)
	os.WriteFile(lp, idx([]int{20}, lab), 0o644)
	fp := func() uint64 {
		t.Helper()
		src, err := data.OpenIDXPair(ip, lp, 0)
		if err != nil {
			t.Fatal(err)
		}
		a, b := src.Split(18)
		f, err := SourceFingerprint(a, b)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	ref := fp()
	if fp() != ref {
		t.Error("the same files gave two fingerprints")
	}
	px[7]++
	os.WriteFile(ip, idx([]int{20, 3, 3}, px), 0o644)
	if fp() == ref {
		t.Error("a changed pixel kept the fingerprint")
	}
	d, _ := data.LoadIDXPair(ip, lp, 0)
	got, err := SourceFingerprint(d, nil)
	var f fingerprint
	f.word(DenseFingerprint(d))
	f.word(0)
	if err != nil || got != f.h {
		t.Errorf("dense: %x, %v; want %x", got, err, f.h)
	}
}
