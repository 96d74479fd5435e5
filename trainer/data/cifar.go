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
// official files hold 10,000 records each.
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

// CIFARSource is rows of CIFAR-10 binary files. The labels are read and
// checked when it is opened (the whole files are checked for their
// length), the pixels of a row only when Subset asks for it, so a rank
// holds its shard, not the 600 MB of the training set as float32.
type CIFARSource struct {
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
	var paths []string
	for _, f := range CIFARTrainFiles {
		paths = append(paths, filepath.Join(dir, f))
	}
	if train, err = openCIFAR(paths); err != nil {
		return nil, nil, err
	}
	if test, err = openCIFAR([]string{filepath.Join(dir, CIFARTestFile)}); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

func openCIFAR(paths []string) (*CIFARSource, error) {
	s := &CIFARSource{files: paths, digest: &idxDigest{}}
	for _, p := range paths {
		s.starts = append(s.starts, len(s.labels))
		labels, err := readCIFARLabels(p)
		if err != nil {
			return nil, err
		}
		s.labels = append(s.labels, labels...)
	}
	s.starts = append(s.starts, len(s.labels))
	return s, nil
}

// readCIFARLabels checks a file's length and reads its records' labels.
func readCIFARLabels(path string) ([]int32, error) {
	f, err := regfile.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errorf(ErrFormat, "cifar10: %s not found: pass --data-dir with the folder of CIFAR-10's binary files (%s, %s)", path, CIFARTrainFiles[0], CIFARTestFile)
		}
		return nil, fmt.Errorf("cifar10: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cifar10: %w", err)
	}
	n := st.Size()
	switch {
	case n == 0:
		return nil, errorf(ErrFormat, "cifar10: %s is empty", path)
	case n%cifarRecord != 0:
		return nil, errorf(ErrFormat, "cifar10: %s has %d bytes, not a whole number of %d-byte records (1 label + 3×32×32 pixels): truncated or not CIFAR-10", path, n, cifarRecord)
	case n/cifarRecord > maxCIFARRecords:
		return nil, errorf(ErrTooLarge, "cifar10: %s holds %d records, more than %d: not a CIFAR-10 file", path, n/cifarRecord, maxCIFARRecords)
	}
	labels := make([]int32, n/cifarRecord)
	var b [1]byte
	for i := range labels {
		if _, err := f.ReadAt(b[:], int64(i)*cifarRecord); err != nil {
			return nil, fmt.Errorf("cifar10: %s: record %d: %w", path, i, err)
		}
		if b[0] >= CIFARClasses {
			return nil, errorf(ErrFormat, "cifar10: %s: record %d has label %d, want 0–%d", path, i, b[0], CIFARClasses-1)
		}
		labels[i] = int32(b[0])
	}
	return labels, nil
}

// Shape is the rows, 3,072 values per image and 10 classes (DenseSource).
func (s *CIFARSource) Shape() (rows, cols, classes int) {
	return len(s.labels), cifarPixels, CIFARClasses
}

// SampleShape is 3×32×32 (Imager).
func (s *CIFARSource) SampleShape() Shape { return Shape{C: 3, H: 32, W: 32} }

// Subset reads rows idx[0], idx[1], … (pixels / 255, as float32).
func (s *CIFARSource) Subset(idx []int) (*Dense, error) {
	if err := checkIndices(idx, len(s.labels)); err != nil {
		return nil, fmt.Errorf("cifar10 subset: %w", err)
	}
	out := &Dense{X: make([]float32, len(idx)*cifarPixels), Y: make([]int32, len(idx)), Rows: len(idx), Cols: cifarPixels,
		Classes: CIFARClasses, Image: s.SampleShape()}
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
				return nil, fmt.Errorf("cifar10: %w", err)
			}
			cur = fi
		}
		at := int64(row-s.starts[fi])*cifarRecord + 1
		if _, err := f.ReadAt(px, at); err != nil {
			return nil, fmt.Errorf("cifar10: %s: record %d: %w (the file changed since it was opened?)", s.files[fi], row-s.starts[fi], err)
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
