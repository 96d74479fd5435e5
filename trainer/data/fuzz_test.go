package data

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dml-project/dml/trainer/internal/inflate"
)

// Seed corpora beyond the f.Add calls live in testdata/fuzz/<FuzzName>/.

func FuzzParseIDX(f *testing.F) {
	img := encodeIDX(IDXUnsignedByte, []int{2, 2, 3}, pattern(12))
	lab := encodeIDX(IDXUnsignedByte, []int{4}, []byte{0, 9, 3, 1})
	f.Add(img)
	f.Add(lab)
	f.Add(gzipBytes(f, img))
	f.Add(gzipBytes(f, lab))
	f.Add(img[:len(img)-1])
	f.Add(append(bytes.Clone(lab), 7))
	f.Add(encodeIDX(0x0D, []int{1}, []byte{0, 0, 0, 0}))
	f.Add(encodeIDX(IDXUnsignedByte, []int{1 << 30, 1 << 30}, nil))
	f.Fuzz(func(t *testing.T, in []byte) {
		raw, rawErr := ParseIDX(bytes.NewReader(in))
		if rawErr == nil {
			size := 1
			for _, d := range raw.Dims {
				size *= d
			}
			if raw.Type != IDXUnsignedByte || len(raw.Dims) == 0 || len(raw.Data) != size {
				t.Fatalf("accepted IDX type %#x dims %v with %d bytes", raw.Type, raw.Dims, len(raw.Data))
			}
			if int64(len(raw.Data)) > inflate.Limit(int64(len(in))) {
				t.Fatalf("%d bytes of data from a %d-byte input", len(raw.Data), len(in))
			}
		}

		im, err := ParseIDXImages(bytes.NewReader(in))
		if err == nil {
			if rawErr != nil || len(im.Shape) == 0 || im.Count != raw.Dims[0] {
				t.Fatalf("images accepted (count %d shape %v) where ParseIDX says %v", im.Count, im.Shape, rawErr)
			}
			for _, d := range im.Shape {
				if d <= 0 {
					t.Fatalf("shape %v", im.Shape)
				}
			}
			if len(im.Pixels) != im.Count*im.Features() {
				t.Fatalf("%d pixels for %d images of %v", len(im.Pixels), im.Count, im.Shape)
			}
			for i, p := range im.Pixels {
				if !(p >= 0 && p <= 1) || p != byteScale[raw.Data[i]] {
					t.Fatalf("pixel %d = %v from byte %d", i, p, raw.Data[i])
				}
			}
		}

		y, err := ParseIDXLabels(bytes.NewReader(in), 10)
		if err == nil {
			if rawErr != nil || len(raw.Dims) != 1 || len(y) != raw.Dims[0] {
				t.Fatalf("%d labels accepted where ParseIDX gives %v, %v", len(y), raw, rawErr)
			}
			for _, l := range y {
				if l < 0 || l >= 10 {
					t.Fatalf("label %d accepted with 10 classes", l)
				}
			}
		}
	})
}

func FuzzParseLIBSVM(f *testing.F) {
	for _, s := range []string{
		"+1 1:0.5 3:-2\n-1 2:4\n",
		"1 1:1 # comment\n\n2 5:1e-3\r\n3\n",
		"0 2:1\n1 1:1 2:1\n",
		"1 3:1 2:1\n",
		"1 1:x\n",
		"0.5 1:1\n",
		"1 0:1\n",
		"1 1:nan\n",
		"1 1:1e39\n",
		"1:1\n",
		"-1 2147483647:1\n",
		"1 1:1 1:1\n",
	} {
		f.Add([]byte(s))
	}
	f.Add(gzipBytes(f, []byte("1 1:1\n-1 2:2\n")))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := ParseLIBSVM(bytes.NewReader(in), LIBSVMOptions{})
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted input gives an invalid Sparse: %v", err)
		}
		if s.Cols > DefaultMaxFeatures(inflate.Limit(int64(len(in)))) {
			t.Fatalf("%d features from a %d-byte input", s.Cols, len(in))
		}
		if s.Rows > 0 && (s.Classes < 1 || len(s.LabelValues) != s.Classes || !slices.IsSorted(s.LabelValues)) {
			t.Fatalf("rows %d classes %d label values %v", s.Rows, s.Classes, s.LabelValues)
		}
		for _, v := range s.Values {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("value %v accepted", v)
			}
		}
		if s.Cols == 0 {
			return
		}
		// Written back as LIBSVM text and parsed again, with the first
		// parse's columns and labels fixed, the data is unchanged.
		text := formatLIBSVM(s)
		again, err := ParseLIBSVM(strings.NewReader(text), LIBSVMOptions{Cols: s.Cols, Labels: s.LabelValues})
		if err != nil {
			t.Fatalf("re-parse of %q: %v", text, err)
		}
		if !slices.Equal(again.Indptr, s.Indptr) || !slices.Equal(again.Indices, s.Indices) ||
			!slices.Equal(again.Values, s.Values) || !slices.Equal(again.Y, s.Y) || again.Cols != s.Cols {
			t.Fatalf("round trip through %q changed the data", text)
		}
	})
}

// formatLIBSVM writes s as LIBSVM text with its original label values.
func formatLIBSVM(s *Sparse) string {
	var sb strings.Builder
	for i := 0; i < s.Rows; i++ {
		sb.WriteString(strconv.FormatInt(s.LabelValues[s.Y[i]], 10))
		idx, val := s.Row(i)
		for k := range idx {
			sb.WriteByte(' ')
			sb.WriteString(strconv.Itoa(int(idx[k]) + 1))
			sb.WriteByte(':')
			sb.WriteString(strconv.FormatFloat(float64(val[k]), 'g', -1, 32))
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

// FuzzIDXSource: reading an image/label pair lazily (OpenIDXPair, then
// Subset of every row) accepts exactly what LoadIDXPair accepts and gives
// the same data.
func FuzzIDXSource(f *testing.F) {
	img := encodeIDX(IDXUnsignedByte, []int{3, 2, 2}, pattern(12))
	lab := encodeIDX(IDXUnsignedByte, []int{3}, []byte{0, 2, 1})
	f.Add(img, lab)
	f.Add(gzipBytes(f, img), lab)
	f.Add(img[:len(img)-1], lab)
	f.Add(append(bytes.Clone(img), 0), lab)
	f.Add(img, lab[:len(lab)-1])
	f.Add(encodeIDX(IDXUnsignedByte, []int{3}, pattern(3)), lab)
	f.Fuzz(func(t *testing.T, img, lab []byte) {
		dir := t.TempDir()
		ip, lp := filepath.Join(dir, "img"), filepath.Join(dir, "lab")
		os.WriteFile(ip, img, 0o644)
		os.WriteFile(lp, lab, 0o644)
		want, wantErr := LoadIDXPair(ip, lp, 0)
		src, err := OpenIDXPair(ip, lp, 0)
		var got *Dense
		if err == nil {
			rows, _, _ := src.Shape()
			got, err = src.Subset(StridedShard(rows, 0, 1))
		}
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("lazy: %v, loaded: %v", err, wantErr)
		}
		if err == nil && (!slices.Equal(got.X, want.X) || !slices.Equal(got.Y, want.Y) || got.Cols != want.Cols || got.Classes != want.Classes) {
			t.Fatalf("lazy read differs from the loaded one")
		}
	})
}
