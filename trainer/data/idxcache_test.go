package data

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestIDXCache: through a cache folder a gzip source's subsets are the
// same as without; the first read leaves one inflated copy there, of the
// file's inflated size; a copy that is not whole is removed and the source
// read instead; a raw source is not copied; a changed source gets a copy
// of another name.
func TestIDXCache(t *testing.T) {
	rows := StridedShard(3000, 1, 3)
	for _, gz := range []bool{true, false} {
		ip, lp := writeIDXPair(t, 3000, 20, 20, gz)
		src, err := OpenIDXPair(ip, lp, 0)
		if err != nil {
			t.Fatal(err)
		}
		want, err := src.Subset(rows)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "cache")
		cached := src.WithCache(dir)
		for i := range 2 {
			got, err := cached.Subset(rows)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.X, want.X) || !slices.Equal(got.Y, want.Y) {
				t.Fatalf("gz %v, read %d: the cached source's subset differs", gz, i)
			}
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		if !gz {
			if len(files) != 0 {
				t.Fatalf("a raw source was copied: %v", files)
			}
			continue
		}
		if len(files) != 1 {
			t.Fatalf("cache holds %v, want one inflated copy", files)
		}
		if st, _ := os.Stat(files[0]); st.Size() != 4+4*3+3000*400 {
			t.Fatalf("the copy has %d bytes", st.Size())
		}
		// Read from the copy: a pixel changed there shows.
		b, _ := os.ReadFile(files[0])
		b[len(b)-1] ^= 0xff
		os.WriteFile(files[0], b, 0o644)
		if got, err := cached.Subset([]int{2999}); err != nil {
			t.Fatal(err)
		} else if full, _ := src.Subset([]int{2999}); got.X[399] == full.X[399] {
			t.Fatal("the cached source did not read the inflated copy")
		}
		// Truncated: removed, and the source read.
		os.Truncate(files[0], 1000)
		got, err := cached.Subset(rows)
		if err != nil || !slices.Equal(got.X, want.X) {
			t.Fatalf("after the copy was truncated: %v", err)
		}
		if _, err := os.Stat(files[0]); err == nil {
			t.Fatal("the truncated copy was kept")
		}
		// A new source file at the same path: another copy.
		ip2, lp2 := writeIDXPair(t, 3000, 20, 20, gz)
		b, _ = os.ReadFile(ip2)
		os.WriteFile(ip, b, 0o644)
		os.Rename(lp2, lp)
		if _, err := cached.Subset(rows); err != nil {
			t.Fatal(err)
		}
		if now, _ := filepath.Glob(filepath.Join(dir, "*")); len(now) != 1 || now[0] == files[0] {
			t.Fatalf("after the source changed, the cache holds %v, want a copy other than %s", now, files[0])
		}
	}
}
