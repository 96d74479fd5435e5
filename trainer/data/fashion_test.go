package data

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
)

// TestLoadFashionMNIST loads the real dataset when it is installed.
func TestLoadFashionMNIST(t *testing.T) {
	if testing.Short() {
		t.Skip("loading 70000 images is slow under -short")
	}
	if _, err := os.Stat(DefaultFashionMNISTDir); err != nil {
		t.Skipf("Fashion-MNIST not installed at %s (make deps installs dataset-fashion-mnist): %v", DefaultFashionMNISTDir, err)
	}
	train, test, err := LoadFashionMNIST("")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		d    *Dense
		rows int
	}{{"train", train, 60000}, {"test", test, 10000}} {
		if c.d.Rows != c.rows || c.d.Cols != 784 || c.d.Classes != 10 {
			t.Errorf("%s: rows=%d cols=%d classes=%d, want %d 784 10", c.name, c.d.Rows, c.d.Cols, c.d.Classes, c.rows)
		}
		if len(c.d.X) != c.rows*784 || len(c.d.Y) != c.rows {
			t.Errorf("%s: len(X)=%d len(Y)=%d", c.name, len(c.d.X), len(c.d.Y))
		}
		// Fashion-MNIST is balanced: rows/10 samples per class.
		count := make([]int, 10)
		for _, l := range c.d.Y {
			count[l]++
		}
		for k, n := range count {
			if n != c.rows/10 {
				t.Errorf("%s: class %d has %d samples, want %d", c.name, k, n, c.rows/10)
			}
		}
		// Pixels in [0, 1], both ends reached (every 7th pixel: a full scan
		// is slow under -race).
		lo, hi := float32(1), float32(0)
		for i := 0; i < len(c.d.X); i += 7 {
			lo, hi = min(lo, c.d.X[i]), max(hi, c.d.X[i])
		}
		if lo != 0 || hi != 1 {
			t.Errorf("%s: pixels span [%v, %v], want [0, 1]", c.name, lo, hi)
		}
	}
}

func TestLoadFashionMNISTMissing(t *testing.T) {
	dir := t.TempDir()
	_, _, err := LoadFashionMNIST(dir)
	if err == nil {
		t.Fatal("no error for an empty directory")
	}
	msg := err.Error()
	for _, want := range []string{dir + "/train-images-idx3-ubyte.gz not found", "install it with `make deps` (Debian package dataset-fashion-mnist) or point Config.Data.Dir at its folder"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans several lines: %q", msg)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %q does not match fs.ErrNotExist", msg)
	}
}

// writeFakeFashion writes a tiny Fashion-MNIST-shaped dataset into dir,
// compressed or not, with the given image side.
func writeFakeFashion(t *testing.T, dir string, gz bool, side int) {
	for _, s := range []struct {
		prefix string
		n      int
	}{{"train", 4}, {"t10k", 3}} {
		img := encodeIDX(8, []int{s.n, side, side}, pattern(s.n*side*side))
		lab := encodeIDX(8, []int{s.n}, pattern(s.n)[:s.n])
		for i := range s.n {
			lab[len(lab)-s.n+i] = byte(9 - i)
		}
		iname, lname := s.prefix+"-images-idx3-ubyte", s.prefix+"-labels-idx1-ubyte"
		if gz {
			img, lab = gzipBytes(t, img), gzipBytes(t, lab)
			iname, lname = iname+".gz", lname+".gz"
		}
		writeFile(t, dir, iname, img)
		writeFile(t, dir, lname, lab)
	}
}

func TestLoadFashionMNISTFiles(t *testing.T) {
	for _, gz := range []bool{false, true} {
		dir := t.TempDir()
		writeFakeFashion(t, dir, gz, 28)
		train, test, err := LoadFashionMNIST(dir)
		if err != nil {
			t.Fatalf("gz=%v: %v", gz, err)
		}
		if train.Rows != 4 || test.Rows != 3 || train.Cols != 784 || test.Classes != 10 || train.Y[0] != 9 || test.Y[2] != 7 {
			t.Fatalf("gz=%v: train %d×%d test %d×%d classes %d labels %v %v", gz, train.Rows, train.Cols, test.Rows, test.Cols, test.Classes, train.Y, test.Y)
		}
	}
	dir := t.TempDir()
	writeFakeFashion(t, dir, true, 27)
	if _, _, err := LoadFashionMNIST(dir); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "images have 729 pixels, want 28×28 = 784") {
		t.Fatalf("27×27 images: %v", err)
	}
}
