package data

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// writeIDXPair writes n images of rows×cols distinct-ish pixels and their
// labels (gzip when gz), returning the two paths.
func writeIDXPair(t *testing.T, n, rows, cols int, gz bool) (string, string) {
	t.Helper()
	dir := t.TempDir()
	px := make([]byte, n*rows*cols)
	for i := range px {
		px[i] = byte(i*7 + i/(rows*cols))
	}
	y := make([]byte, n)
	for i := range y {
		y[i] = byte(i % 5)
	}
	img, lab := encodeIDX(IDXUnsignedByte, []int{n, rows, cols}, px), encodeIDX(IDXUnsignedByte, []int{n}, y)
	if gz {
		img, lab = gzipBytes(t, img), gzipBytes(t, lab)
	}
	ip, lp := filepath.Join(dir, "images"), filepath.Join(dir, "labels")
	os.WriteFile(ip, img, 0o644)
	os.WriteFile(lp, lab, 0o644)
	return ip, lp
}

// TestIDXSourceMatchesLoad: any subset read lazily equals the same subset
// of the fully loaded pair, for shards, a split, repeats and any order.
func TestIDXSourceMatchesLoad(t *testing.T) {
	for _, gz := range []bool{false, true} {
		ip, lp := writeIDXPair(t, 3000, 20, 20, gz) // 2621 rows per 1 MiB block: a full and a partial one
		full, err := LoadIDXPair(ip, lp, 0)
		if err != nil {
			t.Fatal(err)
		}
		src, err := OpenIDXPair(ip, lp, 0)
		if err != nil {
			t.Fatal(err)
		}
		if r, c, k := src.Shape(); r != full.Rows || c != full.Cols || k != full.Classes {
			t.Fatalf("shape %d %d %d, want %d %d %d", r, c, k, full.Rows, full.Cols, full.Classes)
		}
		head, tail := src.Split(2700)
		for name, tc := range map[string]struct {
			src  DenseSource
			off  int
			rows []int
		}{
			"shard 1 of 3": {src, 0, StridedShard(3000, 1, 3)},
			"all":          {src, 0, StridedShard(3000, 0, 1)},
			"unordered":    {src, 0, []int{2999, 0, 17, 17, 1500}},
			"empty":        {src, 0, nil},
			"head shard":   {head, 0, StridedShard(2700, 3, 4)},
			"tail":         {tail, 2700, StridedShard(300, 0, 1)},
		} {
			got, err := tc.src.Subset(tc.rows)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			at := make([]int, len(tc.rows))
			for i, r := range tc.rows {
				at[i] = r + tc.off
			}
			want, _ := full.Subset(at)
			if !slices.Equal(got.X, want.X) || !slices.Equal(got.Y, want.Y) || got.Cols != want.Cols || got.Classes != want.Classes {
				t.Errorf("gzip %v, %s: lazy subset differs from the loaded one", gz, name)
			}
		}
		if _, err := src.Subset([]int{3000}); !errors.Is(err, ErrIndex) {
			t.Errorf("row 3000 of 3000: %v", err)
		}
	}
}

// TestIDXSourceChecksTheFile: Subset still finds a truncated or padded
// image file.
func TestIDXSourceChecksTheFile(t *testing.T) {
	ip, lp := writeIDXPair(t, 100, 4, 4, false)
	src, err := OpenIDXPair(ip, lp, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(ip)
	os.WriteFile(ip, append(b, 1), 0o644)
	if _, err := src.Subset([]int{0}); !errors.Is(err, ErrFormat) {
		t.Errorf("trailing byte: %v", err)
	}
	os.WriteFile(ip, b[:len(b)-1], 0o644)
	if _, err := src.Subset([]int{0}); !errors.Is(err, ErrFormat) {
		t.Errorf("missing byte: %v", err)
	}
}

// TestIDXSourceDigest: every rank gets the same digest of the same files
// whichever rows it reads (a shard, a split half, none); a changed pixel
// or label, or another storage (gzip), changes it.
func TestIDXSourceDigest(t *testing.T) {
	ip, lp := writeIDXPair(t, 500, 6, 6, false)
	gip, glp := writeIDXPair(t, 500, 6, 6, true)
	digest := func(ip, lp string, read func(*IDXSource)) uint64 {
		t.Helper()
		src, err := OpenIDXPair(ip, lp, 0)
		if err != nil {
			t.Fatal(err)
		}
		read(src)
		d, err := src.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	want := digest(ip, lp, func(*IDXSource) {})
	for name, read := range map[string]func(*IDXSource){
		"shard 2 of 3": func(s *IDXSource) { s.Subset(StridedShard(500, 2, 3)) },
		"tail half": func(s *IDXSource) {
			_, tail := s.Split(450)
			tail.Subset([]int{3})
		},
	} {
		if got := digest(ip, lp, read); got != want {
			t.Errorf("%s: digest %x, want %x", name, got, want)
		}
	}
	if got := digest(gip, glp, func(*IDXSource) {}); got == want {
		t.Errorf("gzip: digest %x, the raw file's (the stored bytes differ)", got)
	}
	img, _ := os.ReadFile(ip)
	img[len(img)-1] ^= 1
	os.WriteFile(ip, img, 0o644)
	if digest(ip, lp, func(*IDXSource) {}) == want {
		t.Error("a changed pixel kept the digest")
	}
	img[len(img)-1] ^= 1
	os.WriteFile(ip, img, 0o644)
	lab, _ := os.ReadFile(lp)
	lab[len(lab)-1] ^= 1
	os.WriteFile(lp, lab, 0o644)
	if digest(ip, lp, func(*IDXSource) {}) == want {
		t.Error("a changed label kept the digest")
	}
}
