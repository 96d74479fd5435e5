package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// encodeIDX builds an IDX file of the given type, dimensions and payload.
func encodeIDX(typ byte, dims []int, payload []byte) []byte {
	b := []byte{0, 0, typ, byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, uint32(d))
	}
	return append(b, payload...)
}

// gzipBytes compresses b.
func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pattern returns n distinct-looking bytes (never all equal).
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*37 + 11)
	}
	return b
}

func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestIDXRoundTrip(t *testing.T) {
	const n, h, w = 5, 3, 4
	px := pattern(n * h * w)
	labels := []byte{3, 0, 9, 1, 3}
	images := encodeIDX(IDXUnsignedByte, []int{n, h, w}, px)
	lab := encodeIDX(IDXUnsignedByte, []int{n}, labels)
	for _, gz := range []bool{false, true} {
		t.Run(map[bool]string{false: "raw", true: "gzip"}[gz], func(t *testing.T) {
			dir := t.TempDir()
			ib, lb := images, lab
			if gz {
				ib, lb = gzipBytes(t, images), gzipBytes(t, lab)
			}
			ip := writeFile(t, dir, "images", ib)
			lp := writeFile(t, dir, "labels", lb)
			d, err := LoadIDXPair(ip, lp, 0)
			if err != nil {
				t.Fatal(err)
			}
			if d.Rows != n || d.Cols != h*w || d.Classes != 10 {
				t.Fatalf("got rows=%d cols=%d classes=%d, want %d %d 10", d.Rows, d.Cols, d.Classes, n, h*w)
			}
			for i, b := range px {
				if want := float32(b) / 255; d.X[i] != want {
					t.Fatalf("X[%d] = %v, want %v", i, d.X[i], want)
				}
			}
			for i, l := range labels {
				if d.Y[i] != int32(l) {
					t.Fatalf("Y[%d] = %d, want %d", i, d.Y[i], l)
				}
			}
			if err := d.Validate(); err != nil {
				t.Fatal(err)
			}
			im, err := ReadIDXImages(ip)
			if err != nil {
				t.Fatal(err)
			}
			if im.Count != n || len(im.Shape) != 2 || im.Shape[0] != h || im.Shape[1] != w || im.Features() != h*w {
				t.Fatalf("images count=%d shape=%v", im.Count, im.Shape)
			}
			if d, err := LoadIDXPair(ip, lp, 12); err != nil || d.Classes != 12 {
				t.Fatalf("classes=12: %v, %+v", err, d)
			}
		})
	}
}

// TestIDXGzipByMagic: compression is detected from the content, not the name.
func TestIDXGzipByMagic(t *testing.T) {
	dir := t.TempDir()
	lab := encodeIDX(IDXUnsignedByte, []int{3}, []byte{2, 1, 0})
	for name, b := range map[string][]byte{
		"gzip-without-suffix": gzipBytes(t, lab),
		"raw-with-suffix.gz":  lab,
	} {
		y, err := ReadIDXLabels(writeFile(t, dir, name, b), 3)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(y) != 3 || y[0] != 2 || y[2] != 0 {
			t.Fatalf("%s: labels %v", name, y)
		}
	}
}

func TestParseIDXErrors(t *testing.T) {
	img := encodeIDX(IDXUnsignedByte, []int{2, 3, 3}, pattern(18))
	imgGz := gzipBytes(t, img)
	badCRC := bytes.Clone(imgGz)
	badCRC[len(badCRC)-8] ^= 0xff
	tests := []struct {
		name   string
		in     []byte
		labels bool // parse as labels (with 10 classes) instead of images
		kind   error
		want   string
	}{
		{"empty", nil, false, ErrFormat, "truncated header: want 4 magic bytes, found 0"},
		{"short magic", []byte{0, 0, 8}, false, ErrFormat, "found 3"},
		{"bad magic", append([]byte{1, 2, 8, 3}, img[4:]...), false, ErrFormat, "bad magic 0x01020803"},
		{"zero dims", []byte{0, 0, 8, 0}, false, ErrFormat, "bad magic"},
		{"float type", encodeIDX(0x0D, []int{1, 1}, []byte{0, 0, 0, 0}), false, ErrFormat, "0x0d (float32) is not supported"},
		{"unknown type", encodeIDX(0x42, []int{1, 1}, []byte{0}), false, ErrFormat, "unknown IDX data type 0x42"},
		{"truncated dims", img[:9], false, ErrFormat, "3 dimensions need 12 bytes after the magic, found 5"},
		{"truncated data", img[:len(img)-13], false, ErrFormat, "truncated data: dimensions 2×3×3 declare 18 bytes, found 5"},
		{"trailing data", append(bytes.Clone(img), 0), false, ErrFormat, "trailing data: dimensions 2×3×3 declare 18 bytes"},
		{"truncated gzip", imgGz[:len(imgGz)-12], false, ErrFormat, "gzip stream: unexpected EOF"},
		{"gzip bad checksum", badCRC, false, ErrFormat, "gzip: invalid checksum"},
		{"gzip header only", imgGz[:5], false, ErrFormat, "gzip header"},
		{"gzip trailing garbage", append(bytes.Clone(imgGz), "junk"...), false, ErrFormat, "gzip"},
		{"too large", encodeIDX(8, []int{1 << 20, 1 << 20, 1 << 20}, nil), false, ErrTooLarge, "exceed"},
		{"huge empty images", encodeIDX(8, []int{0, 1 << 31, 1 << 31, 1 << 31}, nil), false, ErrTooLarge, "one image exceeds"},
		{"images one dim", encodeIDX(8, []int{3}, pattern(3)), false, ErrFormat, "1 dimension(s) 3, want count × image shape"},
		{"images zero width", encodeIDX(8, []int{3, 0}, nil), false, ErrFormat, "image dimensions must be positive"},
		{"labels two dims", encodeIDX(8, []int{2, 2}, pattern(4)), true, ErrFormat, "2 dimensions 2×2, want 1"},
		{"label out of range", encodeIDX(8, []int{3}, []byte{1, 10, 2}), true, ErrFormat, "label 10 of sample 1 is out of range [0, 10)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.labels {
				_, err = ParseIDXLabels(bytes.NewReader(tc.in), 10)
			} else {
				_, err = ParseIDXImages(bytes.NewReader(tc.in))
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("error %q does not match %v", err, tc.kind)
			}
		})
	}
}

// TestReadIDXErrorNamesFile: a truncated file's error says which file and
// how many bytes were expected and found.
func TestReadIDXErrorNamesFile(t *testing.T) {
	dir := t.TempDir()
	img := encodeIDX(IDXUnsignedByte, []int{2, 3, 3}, pattern(18))
	p := writeFile(t, dir, "train-images-idx3-ubyte.gz", gzipBytes(t, img[:len(img)-4]))
	_, err := ReadIDXImages(p)
	if err == nil {
		t.Fatal("no error for a truncated file")
	}
	for _, want := range []string{p, "declare 18 bytes, found 14"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if _, err := ReadIDXLabels(filepath.Join(dir, "absent"), 0); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
}

func TestLoadIDXPairCountMismatch(t *testing.T) {
	dir := t.TempDir()
	ip := writeFile(t, dir, "i", encodeIDX(8, []int{3, 2}, pattern(6)))
	lp := writeFile(t, dir, "l", encodeIDX(8, []int{2}, []byte{0, 1}))
	_, err := LoadIDXPair(ip, lp, 0)
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "holds 3 images but") || !strings.Contains(err.Error(), "holds 2 labels") {
		t.Fatalf("got %v", err)
	}
}
