package data

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// gzipBomb is a gzip stream of prefix followed by n bytes of fill repeated
// (about 1000:1, deflate's best): concatenated gzip members, so only one
// MiB is ever compressed.
func gzipBomb(t testing.TB, prefix []byte, n int, fill []byte) []byte {
	t.Helper()
	member := func(b []byte) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(b)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	out := member(prefix)
	pattern := bytes.Repeat(fill, (1<<20)/len(fill)+1)
	mib := member(pattern[:1<<20])
	for ; n >= 1<<20; n -= 1 << 20 {
		out = append(out, mib...)
	}
	return append(out, member(pattern[:n])...)
}

// allocated runs f and returns the bytes it allocated on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// onlyReader hides a reader's Size and Stat, as a pipe would.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// TestIDXGzipBomb: a valid header claiming 192 MB of images, followed by
// that many zeros, gzip-compressed to a few hundred KB, used to load (and
// train at 13.6 GB per rank with a bigger one). Now it is refused, with
// the header checked against the file's size when it is known, and the
// stream cut off at inflate.Limit when it is not.
func TestIDXGzipBomb(t *testing.T) {
	const images = 100000
	payload := images * 28 * 28
	bomb := gzipBomb(t, encodeIDX(IDXUnsignedByte, []int{images, 28, 28}, nil), payload, []byte{0})
	t.Logf("bomb: %d compressed bytes, %d declared", len(bomb), payload)
	path := filepath.Join(t.TempDir(), "bomb-idx3-ubyte.gz")
	os.WriteFile(path, bomb, 0o644)
	for name, parse := range map[string]func() error{
		"file": func() error { _, err := ReadIDXImages(path); return err },
		"pipe": func() error { _, err := ParseIDXImages(onlyReader{bytes.NewReader(bomb)}); return err },
	} {
		var err error
		grew := allocated(func() { err = parse() })
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "decompress the file first") {
			t.Errorf("%s: got %v, want ErrTooLarge saying the file cannot justify its size", name, err)
		}
		if grew > 128<<20 {
			t.Errorf("%s: allocated %d MiB for a %d-byte file", name, grew>>20, len(bomb))
		}
	}
	// A header claiming what a small bomb delivers is within the floor
	// and loads.
	small := gzipBomb(t, encodeIDX(IDXUnsignedByte, []int{1000, 28, 28}, nil), 1000*28*28, []byte{0})
	if im, err := ParseIDXImages(onlyReader{bytes.NewReader(small)}); err != nil || im.Count != 1000 {
		t.Errorf("1000 zero images: %v", err)
	}
}

// TestIDXHeaderBiggerThanFile: a raw file whose header claims more than the
// file holds is refused before any data is read, saying so.
func TestIDXHeaderBiggerThanFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge-idx3-ubyte")
	os.WriteFile(path, encodeIDX(IDXUnsignedByte, []int{60000, 256, 256}, pattern(100)), 0o644)
	var err error
	grew := allocated(func() { _, err = ReadIDXImages(path) })
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "the file is smaller than its header claims") {
		t.Errorf("got %v", err)
	}
	if grew > 1<<20 {
		t.Errorf("allocated %d KiB for a %d-byte file", grew>>10, 116)
	}
}

// TestLIBSVMGzipBomb: a gzip stream of endless LIBSVM lines is cut off at
// inflate.Limit.
func TestLIBSVMGzipBomb(t *testing.T) {
	// 1 KiB lines (a comment), so the parser's time goes to bytes, not lines.
	bomb := gzipBomb(t, []byte("1 1:1\n"), 64<<20, []byte("1 1:1 #"+strings.Repeat("x", 1017)+"\n"))
	var err error
	grew := allocated(func() { _, err = ParseLIBSVM(onlyReader{bytes.NewReader(bomb)}, LIBSVMOptions{}) })
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "decompress the file first") {
		t.Errorf("got %v", err)
	}
	if grew > 128<<20 {
		t.Errorf("allocated %d MiB for a %d-byte file", grew>>20, len(bomb))
	}
}

// TestLIBSVMHugeIndex: a 21-byte file with feature index 2^30 inferred a
// billion features (the trainer then died in an out-of-memory dump). The
// index is now bounded by DefaultMaxFeatures of the input's size, or by the
// caller's MaxFeatures; a fixed Cols needs no bound.
func TestLIBSVMHugeIndex(t *testing.T) {
	for _, tc := range []struct {
		in   string
		opts LIBSVMOptions
		want string // "" = accepted
	}{
		{"1 1073741824:1\n", LIBSVMOptions{}, `line 1: field "1073741824:1": feature index 1073741824 exceeds 1048576, the default limit for 15 bytes`},
		{"1 1:1\n-1 2147483647:1 # 2^31-1\n", LIBSVMOptions{}, "line 2: field \"2147483647:1\": feature index 2147483647 exceeds 1048576"},
		{"1 1099511627776:1\n", LIBSVMOptions{}, "not a positive integer ≤ 2147483647"},
		{"1 1048576:1\n", LIBSVMOptions{}, ""},
		{"1 2000000:1\n", LIBSVMOptions{MaxFeatures: 1 << 21}, ""},
		{"1 3000000:1\n", LIBSVMOptions{MaxFeatures: 1 << 21}, "exceeds 2097152, the limit given"},
		{"1 3000000:1\n", LIBSVMOptions{Cols: 3000000}, ""},
		{"1 1:1\n", LIBSVMOptions{MaxFeatures: -1}, "MaxFeatures = -1"},
	} {
		s, err := ParseLIBSVM(strings.NewReader(tc.in), tc.opts)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q %+v: %v", tc.in, tc.opts, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q %+v: got %v (cols %v), want %q", tc.in, tc.opts, err, s, tc.want)
		}
	}
	_, err := ParseLIBSVM(strings.NewReader("1 1073741824:1\n"), LIBSVMOptions{})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "Config.Data.MaxFeatures 1073741824") {
		t.Errorf("error %v: want ErrTooLarge saying how to raise the limit", err)
	}
	big := strings.Repeat("1 1:1\n", 20000) + "1 1200000:1\n" // 132 KB: 64 × bytes > 2^20
	if s, err := ParseLIBSVM(strings.NewReader(big), LIBSVMOptions{}); err != nil || s.Cols != 1200000 {
		t.Errorf("a 132 KB file with index 1.2 M: %v", err)
	}
}

// TestLIBSVMDenseExpansion: a 4 KB LIBSVM file of 2047 empty rows and one
// feature index 2^20 (within DefaultMaxFeatures) used to become an 8 GB
// dense matrix for the mlp; ToDense now refuses expansions over
// MaxDenseExpansion past MinDenseLimit values.
func TestLIBSVMDenseExpansion(t *testing.T) {
	in := strings.Repeat("1\n", 2047) + "1 1048576:1\n"
	s, err := ParseLIBSVM(strings.NewReader(in), LIBSVMOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var d *Dense
	grew := allocated(func() { d, err = s.ToDense() })
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than 1024 times the data given") {
		t.Errorf("%d-byte file to %d×%d dense: %v", len(in), s.Rows, s.Cols, err)
	}
	if grew > 1<<20 {
		t.Errorf("allocated %d MiB", grew>>20)
	}
	// Dense-ish data (a9a-like: 14 of 123 features per row) converts.
	var sb strings.Builder
	for i := range 40000 {
		sb.WriteString("+1")
		for k := range 14 {
			sb.WriteString(" " + strconv.Itoa(1+k*8+i%8) + ":1")
		}
		sb.WriteString("\n")
	}
	s, err = ParseLIBSVM(strings.NewReader(sb.String()), LIBSVMOptions{Cols: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if d, err = s.ToDense(); err != nil || d.Rows != 40000 {
		t.Errorf("40000 × 2000 from 14 nonzeros a row: %v", err)
	}
}
