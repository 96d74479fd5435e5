package data

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseLIBSVM(t *testing.T) {
	in := "# header comment\n" +
		"+1 1:0.5 3:-2 7:1e-3   # trailing comment\n" +
		"\n" +
		"   \t\n" +
		"-1\t2:4\r\n" +
		"-1\n" + // no features: an all-zero sample
		"+1 7:0 10:3.25\n"
	s, err := ParseLIBSVM(strings.NewReader(in), LIBSVMOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	want := &Sparse{
		Indptr:      []int64{0, 3, 4, 4, 6},
		Indices:     []int32{0, 2, 6, 1, 6, 9},
		Values:      []float32{0.5, -2, 1e-3, 4, 0, 3.25},
		Y:           []int32{1, 0, 0, 1},
		Rows:        4,
		Cols:        10,
		Classes:     2,
		LabelValues: []int64{-1, 1},
	}
	assertSparseEqual(t, s, want)

	d, err := s.ToDense()
	if err != nil {
		t.Fatal(err)
	}
	if d.Rows != 4 || d.Cols != 10 || d.X[0*10+2] != -2 || d.X[1*10+1] != 4 || d.X[3*10+9] != 3.25 || d.Y[3] != 1 {
		t.Fatalf("ToDense: %+v", d)
	}

	// A fixed feature count wider than the file.
	s, err = ParseLIBSVM(strings.NewReader(in), LIBSVMOptions{Cols: 20})
	if err != nil || s.Cols != 20 {
		t.Fatalf("Cols 20: %v, cols %d", err, s.Cols)
	}
}

func assertSparseEqual(t *testing.T, got, want *Sparse) {
	t.Helper()
	if got.Rows != want.Rows || got.Cols != want.Cols || got.Classes != want.Classes ||
		!slices.Equal(got.Indptr, want.Indptr) || !slices.Equal(got.Indices, want.Indices) ||
		!slices.Equal(got.Values, want.Values) || !slices.Equal(got.Y, want.Y) ||
		!slices.Equal(got.LabelValues, want.LabelValues) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestLIBSVMLabelMapping(t *testing.T) {
	tests := []struct {
		name   string
		labels string // one label per line
		opts   LIBSVMOptions
		y      []int32
		values []int64
	}{
		{"plus minus one", "+1 -1 -1 1", LIBSVMOptions{}, []int32{1, 0, 0, 1}, []int64{-1, 1}},
		{"zero one", "0 1 1 0", LIBSVMOptions{}, []int32{0, 1, 1, 0}, []int64{0, 1}},
		{"only ones", "1 1", LIBSVMOptions{}, []int32{1, 1}, []int64{0, 1}},
		{"only minus ones", "-1 -1", LIBSVMOptions{}, []int32{0, 0}, []int64{-1, 1}},
		{"one based multiclass", "3 1 2 3", LIBSVMOptions{}, []int32{2, 0, 1, 2}, []int64{1, 2, 3}},
		{"sparse label values", "7 -3 5 7 100", LIBSVMOptions{}, []int32{2, 0, 1, 2, 3}, []int64{-3, 5, 7, 100}},
		{"minus one zero one", "-1 0 1", LIBSVMOptions{}, []int32{0, 1, 2}, []int64{-1, 0, 1}},
		{"float written integers", "2.0 1e0 2", LIBSVMOptions{}, []int32{1, 0, 1}, []int64{1, 2}},
		{"fixed labels", "3 3", LIBSVMOptions{Labels: []int64{1, 2, 3}}, []int32{2, 2}, []int64{1, 2, 3}},
		{"fixed labels unsorted", "1 -1", LIBSVMOptions{Labels: []int64{1, -1}}, []int32{0, 1}, []int64{1, -1}},
		{"empty", "", LIBSVMOptions{}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := strings.Join(strings.Fields(tc.labels), " 1:1\n")
			if in != "" {
				in += " 1:1\n"
			}
			s, err := ParseLIBSVM(strings.NewReader(in), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.Y, tc.y) || !slices.Equal(s.LabelValues, tc.values) || s.Classes != len(tc.values) {
				t.Fatalf("y=%v values=%v classes=%d, want y=%v values=%v", s.Y, s.LabelValues, s.Classes, tc.y, tc.values)
			}
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestParseLIBSVMErrors(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		opts  LIBSVMOptions
		line  int
		token string
		want  string
	}{
		{"non-numeric value", "1 1:2\n\n# c\n-1 2:x 3:1\n", LIBSVMOptions{}, 4, "2:x", `value "x" is not a number`},
		{"non-numeric index", "1 a:2\n", LIBSVMOptions{}, 1, "a:2", `index "a" is not a positive integer`},
		{"index zero", "1 2:1\n1 0:1\n", LIBSVMOptions{}, 2, "0:1", `index "0" is not a positive integer`},
		{"negative index", "1 -4:1\n", LIBSVMOptions{}, 1, "-4:1", `index "-4" is not a positive integer`},
		{"index overflow", "1 2147483648:1\n", LIBSVMOptions{}, 1, "2147483648:1", "is not a positive integer ≤ 2147483647"},
		{"missing colon", "1 1:1 2\n", LIBSVMOptions{}, 1, "2", "missing ':'"},
		{"empty value", "1 3:\n", LIBSVMOptions{}, 1, "3:", `value "" is not a number`},
		{"duplicate index", "1 1:1 3:1 3:2\n", LIBSVMOptions{}, 1, "3:2", "index 3 repeated"},
		{"descending index", "0 5:1 2:1\n", LIBSVMOptions{}, 1, "2:1", "index 2 after 5: indices must be ascending"},
		{"nan value", "1 1:NaN\n", LIBSVMOptions{}, 1, "1:NaN", "is not finite"},
		{"inf value", "1 1:-inf\n", LIBSVMOptions{}, 1, "1:-inf", "is not finite"},
		{"value overflows float32", "1 1:1e39\n", LIBSVMOptions{}, 1, "1:1e39", "overflows float32"},
		{"non-integer label", "1 1:1\n0.5 1:1\n", LIBSVMOptions{}, 2, "0.5", "label is not an integer"},
		{"non-numeric label", "abc 1:1\n", LIBSVMOptions{}, 1, "abc", "label is not a number"},
		{"nan label", "nan 1:1\n", LIBSVMOptions{}, 1, "nan", "label is not finite"},
		{"huge label", "1e300 1:1\n", LIBSVMOptions{}, 1, "1e300", "label is out of range"},
		{"missing label", "1:1 2:1\n", LIBSVMOptions{}, 1, "1:1", "want a label first"},
		{"index beyond cols", "1 1:1\n1 4:1\n", LIBSVMOptions{Cols: 3}, 2, "4:1", "index 4 exceeds the feature count 3"},
		{"label not in fixed list", "1 1:1\n2 1:1\n", LIBSVMOptions{Labels: []int64{0, 1}}, 2, "2", "label 2 is not one of the given labels [0 1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseLIBSVM(strings.NewReader(tc.in), tc.opts)
			var le *LIBSVMError
			if !errors.As(err, &le) {
				t.Fatalf("error %v is not a *LIBSVMError", err)
			}
			if le.Line != tc.line || le.Token != tc.token || !strings.Contains(le.Reason, tc.want) {
				t.Fatalf("got line %d token %q reason %q, want line %d token %q reason ~%q", le.Line, le.Token, le.Reason, tc.line, tc.token, tc.want)
			}
			if !errors.Is(err, ErrFormat) {
				t.Errorf("%v does not match ErrFormat", err)
			}
		})
	}
}

func TestParseLIBSVMBadOptions(t *testing.T) {
	for _, opts := range []LIBSVMOptions{{Cols: -1}, {Labels: []int64{1, 2, 1}}} {
		if _, err := ParseLIBSVM(strings.NewReader("1 1:1\n"), opts); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: got %v, want ErrConfig", opts, err)
		}
	}
}

func TestLoadLIBSVM(t *testing.T) {
	dir := t.TempDir()
	train := writeFile(t, dir, "train.svm", []byte("1 1:1 2:2\n2 3:3\n3 1:1\n"))
	// gzip, detected by content; lacks class 2 and feature 3.
	test := writeFile(t, dir, "test.svm", gzipBytes(t, []byte("3 2:1\n1 1:1\n")))
	tr, err := LoadLIBSVM(train, LIBSVMOptions{})
	if err != nil {
		t.Fatal(err)
	}
	te, err := LoadLIBSVM(test, LIBSVMOptions{Cols: tr.Cols, Labels: tr.LabelValues})
	if err != nil {
		t.Fatal(err)
	}
	if te.Cols != 3 || te.Classes != 3 || !slices.Equal(te.Y, []int32{2, 0}) {
		t.Fatalf("test set parsed like the training set: cols=%d classes=%d y=%v", te.Cols, te.Classes, te.Y)
	}

	bad := writeFile(t, dir, "bad.svm", []byte("1 1:1\n1 1:one\n"))
	_, err = LoadLIBSVM(bad, LIBSVMOptions{})
	want := bad + `: line 2: field "1:one": value "one" is not a number`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	if _, err := LoadLIBSVM(filepath.Join(dir, "absent"), LIBSVMOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	// A truncated gzip is a format error, not a silent short file.
	gz := gzipBytes(t, []byte(strings.Repeat("1 1:1 2:2\n", 1000)))
	cut := writeFile(t, dir, "cut.svm.gz", gz[:len(gz)/2])
	if _, err := LoadLIBSVM(cut, LIBSVMOptions{}); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Fatalf("truncated gzip: %v", err)
	}
}
