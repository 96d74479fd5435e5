package data

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dml-project/dml/internal/crash"
)

// DefaultFashionMNISTDir is where Debian's dataset-fashion-mnist package
// installs the four gzip IDX files of Fashion-MNIST.
const DefaultFashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// Fashion-MNIST's shape: 28×28 grey images in 10 classes.
const (
	FashionMNISTCols    = 28 * 28
	FashionMNISTClasses = 10
)

// FashionMNISTClassNames names the classes by label.
var FashionMNISTClassNames = [FashionMNISTClasses]string{
	"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
	"Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
}

// fashionInstallHint ends the error for a missing Fashion-MNIST file.
const fashionInstallHint = "install it with `make deps` (Debian package dataset-fashion-mnist) or point Config.Data.Dir at its folder"

// FashionMNISTFiles are Fashion-MNIST's four files, each read with a .gz
// suffix or without one.
var FashionMNISTFiles = []string{
	"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
	"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
}

// LoadFashionMNIST reads Fashion-MNIST from dir (DefaultFashionMNISTDir when
// dir is ""): the training set from train-images-idx3-ubyte and
// train-labels-idx1-ubyte, the test set from t10k-images-idx3-ubyte and
// t10k-labels-idx1-ubyte, each found with a .gz suffix or without one (the
// .gz name is tried first). Pixels are scaled to [0, 1]; both sets have
// FashionMNISTCols columns and FashionMNISTClasses classes. The two sets
// are read concurrently.
//
// A missing file gives a one-line error, matching fs.ErrNotExist, that names
// the path and says how to install the data.
func LoadFashionMNIST(dir string) (train, test *Dense, err error) {
	if dir == "" {
		dir = DefaultFashionMNISTDir
	}
	paths := make(map[string]string)
	for _, base := range FashionMNISTFiles {
		p, err := findDataFile(dir, base)
		if err != nil {
			return nil, nil, err
		}
		paths[base] = p
	}
	var testErr error
	var panicked *crash.Panic
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer crash.Capture(&panicked) // raised again below, on the caller
		test, testErr = loadFashionSplit(paths["t10k-images-idx3-ubyte"], paths["t10k-labels-idx1-ubyte"])
	}()
	train, err = loadFashionSplit(paths["train-images-idx3-ubyte"], paths["train-labels-idx1-ubyte"])
	<-done
	crash.Repanic(panicked)
	if err != nil {
		return nil, nil, err
	}
	if testErr != nil {
		return nil, nil, testErr
	}
	return train, test, nil
}

// loadFashionSplit loads one images/labels pair and checks its image size.
func loadFashionSplit(images, labels string) (*Dense, error) {
	d, err := LoadIDXPair(images, labels, FashionMNISTClasses)
	if err != nil {
		return nil, fmt.Errorf("fashion-mnist: %w", err)
	}
	if d.Cols != FashionMNISTCols {
		return nil, errorf(ErrFormat, "fashion-mnist: %s: images have %d pixels, want 28×28 = %d", images, d.Cols, FashionMNISTCols)
	}
	return d, nil
}

// findDataFile returns dir/base.gz or else dir/base, whichever exists.
func findDataFile(dir, base string) (string, error) {
	gz := filepath.Join(dir, base+".gz")
	for _, p := range []string{gz, filepath.Join(dir, base)} {
		_, err := os.Stat(p)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("fashion-mnist: %w", err)
		}
	}
	return "", errorf(fs.ErrNotExist, "fashion-mnist: %s not found: %s", gz, fashionInstallHint)
}

// OpenFashionMNIST opens Fashion-MNIST from dir (as LoadFashionMNIST) as
// two IDXSources: only the labels and the image headers are read now, the
// pixels of the rows a rank asks for later (IDXSource.Subset).
func OpenFashionMNIST(dir string) (train, test *IDXSource, err error) {
	if dir == "" {
		dir = DefaultFashionMNISTDir
	}
	open := func(images, labels string) (*IDXSource, error) {
		ip, err := findDataFile(dir, images)
		if err != nil {
			return nil, err
		}
		lp, err := findDataFile(dir, labels)
		if err != nil {
			return nil, err
		}
		s, err := OpenIDXPair(ip, lp, FashionMNISTClasses)
		if err != nil {
			return nil, fmt.Errorf("fashion-mnist: %w", err)
		}
		if s.cols != FashionMNISTCols {
			return nil, errorf(ErrFormat, "fashion-mnist: %s: images have %d pixels, want 28×28 = %d", ip, s.cols, FashionMNISTCols)
		}
		return s, nil
	}
	if train, err = open("train-images-idx3-ubyte", "train-labels-idx1-ubyte"); err != nil {
		return nil, nil, err
	}
	if test, err = open("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}
