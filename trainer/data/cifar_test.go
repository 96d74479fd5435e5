package data

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeCIFAR writes a CIFAR-10 folder of n records per file: record i of
// file f has label (f+i) mod 10 and pixel j = (f·7 + i·3 + j) mod 256.
func writeCIFAR(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	for fi, name := range append(append([]string(nil), CIFARTrainFiles...), CIFARTestFile) {
		b := make([]byte, 0, n*cifarRecord)
		for i := range n {
			b = append(b, byte((fi+i)%10))
			for j := range cifarPixels {
				b = append(b, byte((fi*7+i*3+j)%256))
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestCIFAR10: the files are read as records of a label and 3×32×32
// channel-major pixels scaled by 1/255, a rank's subset in the order asked
// for (across files), with the shape and classes of CIFAR-10.
func TestCIFAR10(t *testing.T) {
	dir := writeCIFAR(t, 4)
	train, test, err := OpenCIFAR10(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r, c, k := train.Shape(); r != 20 || c != 3072 || k != 10 {
		t.Fatalf("train shape %d×%d, %d classes", r, c, k)
	}
	if r, _, _ := test.Shape(); r != 4 || train.SampleShape() != (Shape{C: 3, H: 32, W: 32}) {
		t.Fatalf("test rows %d, sample shape %v", r, train.SampleShape())
	}
	d, err := train.Subset([]int{17, 0, 5, 17})
	if err != nil {
		t.Fatal(err)
	}
	for k, row := range []int{17, 0, 5, 17} {
		fi, i := row/4, row%4
		if d.Y[k] != int32((fi+i)%10) {
			t.Errorf("row %d: label %d, want %d", row, d.Y[k], (fi+i)%10)
		}
		for _, j := range []int{0, 1, 1024, 3071} {
			if want := float32((fi*7+i*3+j)%256) / 255; d.X[k*3072+j] != want {
				t.Errorf("row %d pixel %d: %v, want %v", row, j, d.X[k*3072+j], want)
			}
		}
	}
	if d.SampleShape() != (Shape{C: 3, H: 32, W: 32}) {
		t.Errorf("subset's sample shape %v", d.SampleShape())
	}
	if _, err := train.Subset([]int{20}); err == nil {
		t.Error("row 20 of 20 was read")
	}
	a, _ := train.Digest()
	other, _, _ := OpenCIFAR10(writeCIFAR(t, 5))
	b, _ := other.Digest()
	if a == b {
		t.Error("different files, same digest")
	}
}

// TestCIFAR10Hostile: a missing, empty, truncated or padded file, or a
// label outside 0–9, is refused naming the file (and the record).
func TestCIFAR10Hostile(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(dir string)
		want string
	}{
		{"missing", func(d string) { os.Remove(filepath.Join(d, "data_batch_3.bin")) }, "data_batch_3.bin not found: pass --data-dir"},
		{"empty", func(d string) { os.WriteFile(filepath.Join(d, "test_batch.bin"), nil, 0o644) }, "test_batch.bin is empty"},
		{"truncated", func(d string) {
			p := filepath.Join(d, "data_batch_2.bin")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-1], 0o644)
		}, "data_batch_2.bin has 9218 bytes, not a whole number of 3073-byte records"},
		{"padded", func(d string) {
			p := filepath.Join(d, "data_batch_1.bin")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append(b, 0), 0o644)
		}, "data_batch_1.bin has 9220 bytes"},
		{"label 10", func(d string) {
			p := filepath.Join(d, "data_batch_5.bin")
			b, _ := os.ReadFile(p)
			b[2*cifarRecord] = 10
			os.WriteFile(p, b, 0o644)
		}, "data_batch_5.bin: record 2 has label 10, want 0–9"},
		{"a folder", func(d string) {
			p := filepath.Join(d, "data_batch_4.bin")
			os.Remove(p)
			os.Mkdir(p, 0o755)
		}, "data_batch_4.bin"},
	} {
		dir := writeCIFAR(t, 3)
		tc.edit(dir)
		_, _, err := OpenCIFAR10(dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line containing %q", tc.name, err, tc.want)
		}
		if tc.name != "missing" && tc.name != "a folder" && !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v does not match ErrFormat", tc.name, err)
		}
	}
}

// writeCIFAR100 writes a CIFAR-100 folder of n training and n/2 test
// records: record i has coarse label i mod 20, fine label (7·i+f) mod 100
// (f = 0 training, 1 test) and pixel j = (i·5 + j) mod 256.
func writeCIFAR100(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	for f, c := range []struct {
		name string
		n    int
	}{{CIFAR100TrainFile, n}, {CIFAR100TestFile, n / 2}} {
		var b []byte
		for i := range c.n {
			b = append(b, byte(i%20), byte((7*i+f)%100))
			for j := range cifarPixels {
				b = append(b, byte((i*5+j)%256))
			}
		}
		if err := os.WriteFile(filepath.Join(dir, c.name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestCIFAR100: records of a coarse and a fine label byte then the
// pixels; the fine labels are the classes (100), or the coarse ones (20).
func TestCIFAR100(t *testing.T) {
	dir := writeCIFAR100(t, 30)
	for _, coarse := range []bool{false, true} {
		train, test, err := OpenCIFAR100(dir, coarse)
		if err != nil {
			t.Fatal(err)
		}
		wantK := 100
		if coarse {
			wantK = 20
		}
		if r, c, k := train.Shape(); r != 30 || c != 3072 || k != wantK {
			t.Fatalf("coarse %v: train shape %d×%d, %d classes", coarse, r, c, k)
		}
		if r, _, _ := test.Shape(); r != 15 {
			t.Fatalf("test rows %d", r)
		}
		d, err := train.Subset([]int{29, 3})
		if err != nil {
			t.Fatal(err)
		}
		for k, i := range []int{29, 3} {
			want := int32((7 * i) % 100)
			if coarse {
				want = int32(i % 20)
			}
			if d.Y[k] != want || d.Classes != wantK {
				t.Errorf("coarse %v row %d: label %d of %d classes, want %d", coarse, i, d.Y[k], d.Classes, want)
			}
			for _, j := range []int{0, 1, 3071} {
				if px := float32((i*5+j)%256) / 255; d.X[k*3072+j] != px {
					t.Errorf("row %d pixel %d: %v, want %v", i, j, d.X[k*3072+j], px)
				}
			}
		}
	}
}

// TestCIFAR100Hostile: CIFAR-10's checks, on 3074-byte records, and
// either label byte out of range (whichever labels are used).
func TestCIFAR100Hostile(t *testing.T) {
	rec := 2 + cifarPixels
	for _, tc := range []struct {
		name string
		edit func(dir string)
		want string
	}{
		{"missing", func(d string) { os.Remove(filepath.Join(d, "test.bin")) }, "test.bin not found: pass --data-dir with the folder of CIFAR-100's binary files"},
		{"empty", func(d string) { os.WriteFile(filepath.Join(d, "train.bin"), nil, 0o644) }, "train.bin is empty"},
		{"cifar-10 records", func(d string) {
			os.WriteFile(filepath.Join(d, "train.bin"), make([]byte, 4*cifarRecord), 0o644)
		}, "train.bin has 12292 bytes, not a whole number of 3074-byte records (2 label byte(s)"},
		{"coarse 20", func(d string) {
			p := filepath.Join(d, "train.bin")
			b, _ := os.ReadFile(p)
			b[3*rec] = 20
			os.WriteFile(p, b, 0o644)
		}, "train.bin: record 3 has label 20 (coarse), want 0–19"},
		{"fine 100", func(d string) {
			p := filepath.Join(d, "test.bin")
			b, _ := os.ReadFile(p)
			b[rec+1] = 100
			os.WriteFile(p, b, 0o644)
		}, "test.bin: record 1 has label 100 (fine), want 0–99"},
	} {
		for _, coarse := range []bool{false, true} {
			dir := writeCIFAR100(t, 6)
			tc.edit(dir)
			_, _, err := OpenCIFAR100(dir, coarse)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s (coarse %v): %v, want one line containing %q", tc.name, coarse, err, tc.want)
			}
			if tc.name != "missing" && !errors.Is(err, ErrFormat) {
				t.Errorf("%s: %v does not match ErrFormat", tc.name, err)
			}
		}
	}
}
