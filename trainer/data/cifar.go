package data

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/dml-project/dml/internal/regfile"
)

// CIFAR-10's binary form (the "CIFAR-10 binary version" of the dataset's
// page): data_batch_1.bin … data_batch_5.bin (training) and test_batch.bin,
// each a sequence of records of 1 label byte (0–9) then 3,072 pixel bytes,
// the 32×32 red plane, then green, then blue (C×H×W, row-major). The
// official files hold 10,000 records each. CIFAR-100's ("CIFAR-100 binary
// version"): train.bin (50,000 records) and test.bin (10,000), each record
// a coarse label byte (0–19, the superclass), a fine label byte (0–99),
// then the pixels as CIFAR-10's.
const (
	CIFARClasses    = 10
	cifarPixels     = 3 * 32 * 32
	cifarRecord     = 1 + cifarPixels
	maxCIFARRecords = 1 << 20 // per file: a guard against a file that is not one
)

// CIFARTrainFiles and CIFARTestFile are the files OpenCIFAR10 reads.
var (
	CIFARTrainFiles = []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"}
	CIFARTestFile   = "test_batch.bin"
)

// CIFAR100Classes and CIFAR100CoarseClasses are CIFAR-100's fine and
// coarse class counts; CIFAR100TrainFile and CIFAR100TestFile its files.
const (
	CIFAR100Classes       = 100
	CIFAR100CoarseClasses = 20
	CIFAR100TrainFile     = "train.bin"
	CIFAR100TestFile      = "test.bin"
)

// cifarFormat is one of the binary forms: its name in messages, the label
// bytes before each record's pixels and their class counts, which of them
// is the class, and the files.
type cifarFormat struct {
	name        string
	labels      []int // each label byte's class count
	label       int   // the one that is the sample's class
	train       []string
	test        string
	description string // the files, for a message
}

var (
	cifar10Format = cifarFormat{name: "cifar10", labels: []int{CIFARClasses}, train: CIFARTrainFiles, test: CIFARTestFile,
		description: "CIFAR-10's binary files (" + CIFARTrainFiles[0] + ", " + CIFARTestFile + ")"}
	cifar100Format = cifarFormat{name: "cifar100", labels: []int{CIFAR100CoarseClasses, CIFAR100Classes}, label: 1,
		train: []string{CIFAR100TrainFile}, test: CIFAR100TestFile, description: "CIFAR-100's binary files (" + CIFAR100TrainFile + ", " + CIFAR100TestFile + ")"}
)

// record is a record's bytes: its labels and pixels.
func (f cifarFormat) record() int { return len(f.labels) + cifarPixels }

// classes is the class count of the label that is the sample's class.
func (f cifarFormat) classes() int { return f.labels[f.label] }

// CIFARSource is rows of CIFAR-10 or CIFAR-100 binary files. The labels
// are read and checked when it is opened (the whole files are checked for
// their length), the pixels of a row only when Subset asks for it, so a
// rank holds its shard, not the 600 MB of the training set as float32.
type CIFARSource struct {
	format cifarFormat
	files  []string
	starts []int   // starts[i]: the first row in files[i]; one more entry: the total
	labels []int32 // every row's
	digest *idxDigest
}

var _ DenseSource = (*CIFARSource)(nil)

// OpenCIFAR10 opens the training and test files in dir. A file that is
// missing, empty, not a whole number of records, too large, or that holds
// a label outside 0–9 is an error naming it (and the record).
func OpenCIFAR10(dir string) (train, test *CIFARSource, err error) {
	return openCIFARDir(dir, cifar10Format)
}

// OpenCIFAR100 opens CIFAR-100's training and test files in dir, with the
// fine labels (100 classes) as the samples' classes, or the coarse ones
// (20 superclasses) where coarse. Both label bytes of every record are
// checked (coarse below 20, fine below 100), as OpenCIFAR10 checks its.
func OpenCIFAR100(dir string, coarse bool) (train, test *CIFARSource, err error) {
	f := cifar100Format
	if coarse {
		f.name, f.label = "cifar100-coarse", 0
	}
	return openCIFARDir(dir, f)
}

func openCIFARDir(dir string, f cifarFormat) (train, test *CIFARSource, err error) {
	var paths []string
	for _, name := range f.train {
		paths = append(paths, filepath.Join(dir, name))
	}
	if train, err = openCIFAR(paths, f); err != nil {
		return nil, nil, err
	}
	if test, err = openCIFAR([]string{filepath.Join(dir, f.test)}, f); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

func openCIFAR(paths []string, format cifarFormat) (*CIFARSource, error) {
	s := &CIFARSource{format: format, files: paths, digest: &idxDigest{}}
	for _, p := range paths {
		s.starts = append(s.starts, len(s.labels))
		labels, err := format.readLabels(p)
		if err != nil {
			return nil, err
		}
		s.labels = append(s.labels, labels...)
	}
	s.starts = append(s.starts, len(s.labels))
	return s, nil
}

// readLabels checks a file's length and reads its records' labels,
// checking every label byte.
func (c cifarFormat) readLabels(path string) ([]int32, error) {
	f, err := regfile.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errorf(ErrFormat, "%s: %s not found: pass --data-dir with the folder of %s", c.name, path, c.description)
		}
		return nil, fmt.Errorf("%s: %w", c.name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.name, err)
	}
	n, rec := st.Size(), int64(c.record())
	switch {
	case n == 0:
		return nil, errorf(ErrFormat, "%s: %s is empty", c.name, path)
	case n%rec != 0:
		return nil, errorf(ErrFormat, "%s: %s has %d bytes, not a whole number of %d-byte records (%d label byte(s) + 3×32×32 pixels): truncated or not %s", c.name, path, n, rec, len(c.labels), c.description)
	case n/rec > maxCIFARRecords:
		return nil, errorf(ErrTooLarge, "%s: %s holds %d records, more than %d: not one of %s", c.name, path, n/rec, maxCIFARRecords, c.description)
	}
	labels := make([]int32, n/rec)
	b := make([]byte, len(c.labels))
	for i := range labels {
		if _, err := f.ReadAt(b, int64(i)*rec); err != nil {
			return nil, fmt.Errorf("%s: %s: record %d: %w", c.name, path, i, err)
		}
		for k, classes := range c.labels {
			if int(b[k]) < classes {
				continue
			}
			which := ""
			if len(c.labels) > 1 {
				which = [...]string{" (coarse)", " (fine)"}[k]
			}
			return nil, errorf(ErrFormat, "%s: %s: record %d has label %d%s, want 0–%d", c.name, path, i, b[k], which, classes-1)
		}
		labels[i] = int32(b[c.label])
	}
	return labels, nil
}

// Shape is the rows, 3,072 values per image and the classes (10, 100 or
// 20) (DenseSource).
func (s *CIFARSource) Shape() (rows, cols, classes int) {
	return len(s.labels), cifarPixels, s.format.classes()
}

// SampleShape is 3×32×32 (Imager).
func (s *CIFARSource) SampleShape() Shape { return Shape{C: 3, H: 32, W: 32} }

// Subset reads rows idx[0], idx[1], … (pixels / 255, as float32).
func (s *CIFARSource) Subset(idx []int) (*Dense, error) {
	if err := checkIndices(idx, len(s.labels)); err != nil {
		return nil, fmt.Errorf("%s subset: %w", s.format.name, err)
	}
	out := &Dense{X: make([]float32, len(idx)*cifarPixels), Y: make([]int32, len(idx)), Rows: len(idx), Cols: cifarPixels,
		Classes: s.format.classes(), Image: s.SampleShape()}
	order := make([]int, len(idx))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return idx[a] - idx[b] })
	px := make([]byte, cifarPixels)
	var f *os.File
	cur := -1
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for _, o := range order {
		row := idx[o]
		fi, _ := slices.BinarySearch(s.starts, row+1)
		fi--
		if fi != cur {
			if f != nil {
				f.Close()
			}
			var err error
			if f, err = regfile.Open(s.files[fi]); err != nil {
				return nil, fmt.Errorf("%s: %w", s.format.name, err)
			}
			cur = fi
		}
		at := int64(row-s.starts[fi])*int64(s.format.record()) + int64(len(s.format.labels))
		if _, err := f.ReadAt(px, at); err != nil {
			return nil, fmt.Errorf("%s: %s: record %d: %w (the file changed since it was opened?)", s.format.name, s.files[fi], row-s.starts[fi], err)
		}
		scaleBytes(out.X[o*cifarPixels:(o+1)*cifarPixels], px)
		out.Y[o] = s.labels[row]
	}
	return out, nil
}

// Digest is a CRC-64 of the files as stored (as IDXSource's).
func (s *CIFARSource) Digest() (uint64, error) {
	s.digest.once.Do(func() {
		crc := crc64.New(crcTable)
		for _, p := range s.files {
			f, err := regfile.Open(p)
			if err != nil {
				s.digest.err = err
				return
			}
			_, err = io.Copy(crc, f)
			f.Close()
			if err != nil {
				s.digest.err = fmt.Errorf("%s: %w", p, err)
				return
			}
		}
		binary.Write(crc, binary.LittleEndian, int64(len(s.labels)))
		s.digest.sum = crc.Sum64()
	})
	return s.digest.sum, s.digest.err
}
