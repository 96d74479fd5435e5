package data

import (
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"io"
	"slices"
	"sync"

	"github.com/dml-project/dml/internal/hugemem"
	"github.com/dml-project/dml/internal/regfile"
)

// DenseSource is a dense dataset that hands out copies of some of its rows:
// a *Dense already in memory, or an IDXSource that reads just those rows
// from its files. A rank that asks only for its shard never holds the whole
// set (Fashion-MNIST's 220 MB of float32 pixels), and a parameter server,
// which needs only the shape, reads only the headers and the labels.
type DenseSource interface {
	// Shape is the number of rows, the features per row and the classes.
	Shape() (rows, cols, classes int)
	// Subset returns copies of rows idx[0], idx[1], … in that order.
	Subset(idx []int) (*Dense, error)
}

var (
	_ DenseSource = (*Dense)(nil)
	_ DenseSource = (*IDXSource)(nil)
)

// Shape is d's rows, columns and classes (DenseSource).
func (d *Dense) Shape() (rows, cols, classes int) { return d.Rows, d.Cols, d.Classes }

// IDXSource is rows [lo, hi) of an IDX image file and its labels. The
// labels (one byte per image) are read and checked when it is opened, the
// images only by Subset, which streams the file once per call, scales the
// requested rows into a new Dense and checks the rest of the file as
// ParseIDX would (truncation, trailing data, gzip bounds).
type IDXSource struct {
	digest  *idxDigest // shared by the copies Split and WithClasses make
	images  string
	dims    []int   // the image file's dimensions
	labels  []int32 // labels of every row of the file
	lo, hi  int
	cols    int
	classes int
	cache   string // the folder of inflated copies (idxcache.go; "": none)
}

// OpenIDXPair opens an image file and its label file as LoadIDXPair loads
// them (same checks and class rule), reading only the labels and the image
// header now.
func OpenIDXPair(imagesPath, labelsPath string, classes int) (*IDXSource, error) {
	y, err := ReadIDXLabels(labelsPath, classes)
	if err != nil {
		return nil, err
	}
	f, err := regfile.Open(imagesPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	_, dims, _, err := openIDX(f)
	if err == nil && len(dims) < 2 {
		err = errorf(ErrFormat, "%d dimension(s) %s, want count × image shape", len(dims), dimString(dims))
	}
	cols := 1
	for _, d := range dims[min(1, len(dims)):] {
		if err == nil && d == 0 {
			err = errorf(ErrFormat, "dimensions %s: image dimensions must be positive", dimString(dims))
		}
		cols *= d
	}
	if err != nil {
		return nil, fmt.Errorf("%s: IDX images: %w", imagesPath, err)
	}
	if dims[0] != len(y) {
		return nil, errorf(ErrFormat, "%s holds %d images but %s holds %d labels", imagesPath, dims[0], labelsPath, len(y))
	}
	if classes == 0 {
		for _, l := range y {
			classes = max(classes, int(l)+1)
		}
	}
	return &IDXSource{digest: &idxDigest{}, images: imagesPath, dims: dims, labels: y, lo: 0, hi: len(y), cols: cols, classes: classes}, nil
}

// idxDigest caches the checksum of a source's files.
type idxDigest struct {
	once sync.Once
	sum  uint64
	err  error
}

// Digest is a CRC-64 (ECMA) of the image file as stored (gzip or raw, not
// decompressed: a fast read) and of every label of the label file, the
// same for every source Split or WithClasses made from one OpenIDXPair:
// ranks that opened different files get different digests (with
// overwhelming probability; a guard against mistakes, not adversaries),
// although each reads only its own rows' pixels. The same images stored
// once raw and once gzip differ.
func (s *IDXSource) Digest() (uint64, error) {
	s.digest.once.Do(func() {
		f, err := regfile.Open(s.images)
		if err != nil {
			s.digest.err = err
			return
		}
		defer f.Close()
		crc := crc64.New(crcTable)
		if _, err := io.Copy(crc, f); err != nil {
			s.digest.err = fmt.Errorf("%s: %w", s.images, err)
			return
		}
		binary.Write(crc, binary.LittleEndian, s.labels)
		s.digest.sum = crc.Sum64()
	})
	return s.digest.sum, s.digest.err
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// Shape is the source's rows, pixels per image and classes (DenseSource).
func (s *IDXSource) Shape() (rows, cols, classes int) { return s.hi - s.lo, s.cols, s.classes }

// Split returns the first n rows and the rest as two sources.
func (s *IDXSource) Split(n int) (head, tail *IDXSource) {
	h, t := *s, *s
	h.hi = s.lo + n
	t.lo = s.lo + n
	return &h, &t
}

// WithClasses returns a copy of s that reports classes classes (at least
// its largest label + 1), as when a training and a test set agree on a
// count.
func (s *IDXSource) WithClasses(classes int) *IDXSource {
	c := *s
	c.classes = max(classes, s.classes)
	return &c
}

// Subset reads rows idx[0], idx[1], … (indices into the source's rows) in
// one pass over the image file.
func (s *IDXSource) Subset(idx []int) (*Dense, error) {
	n := s.hi - s.lo
	if err := checkIndices(idx, n); err != nil {
		return nil, fmt.Errorf("idx subset: %w", err)
	}
	out := &Dense{X: make([]float32, len(idx)*s.cols), Y: make([]int32, len(idx)), Rows: len(idx), Cols: s.cols, Classes: s.classes, Image: s.SampleShape()}
	hugemem.Advise(out.X) // its first touches, below, are most of the time this takes
	// Positions in out, ordered by the file row they come from.
	order := make([]int, len(idx))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return idx[a] - idx[b] })
	for i, k := range idx {
		out.Y[i] = s.labels[s.lo+k]
	}
	if err := s.stream(func(row int, px []byte) {
		for len(order) > 0 && s.lo+idx[order[0]] == row {
			scaleBytes(out.X[order[0]*s.cols:(order[0]+1)*s.cols], px)
			order = order[1:]
		}
	}); err != nil {
		return nil, fmt.Errorf("%s: IDX images: %w", s.images, err)
	}
	return out, nil
}

// stream reads the image file once, handing each row's pixels to f (the
// slice is reused), and checks that the file holds exactly its dimensions'
// bytes and the same dimensions as when it was opened.
func (s *IDXSource) stream(f func(row int, px []byte)) error {
	return s.streamFile(s.imagesFile(), f)
}

// streamFile is stream from the file at path.
func (s *IDXSource) streamFile(path string, f func(row int, px []byte)) error {
	file, err := regfile.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	src, dims, _, err := openIDX(file)
	if err != nil {
		return err
	}
	if !slices.Equal(dims, s.dims) {
		return errorf(ErrFormat, "dimensions changed from %s to %s while reading", dimString(s.dims), dimString(dims))
	}
	rows := dims[0]
	// Rows after the last one this source covers are read only to check
	// the file; a block of rows at a time.
	per := max(1, (1<<20)/s.cols)
	buf := make([]byte, per*s.cols)
	for r := 0; r < rows; r += per {
		k := min(per, rows-r)
		if got, err := io.ReadFull(src, buf[:k*s.cols]); err != nil {
			return readErr(err, "truncated data: dimensions %s declare %d bytes, found %d", dimString(dims), int64(rows)*int64(s.cols), int64(r)*int64(s.cols)+int64(got))
		}
		for j := range k {
			f(r+j, buf[j*s.cols:(j+1)*s.cols])
		}
	}
	var one [1]byte
	if n, err := io.ReadFull(src, one[:]); n > 0 {
		return errorf(ErrFormat, "trailing data: dimensions %s declare %d bytes, found more", dimString(dims), int64(rows)*int64(s.cols))
	} else if err != io.EOF {
		return readErr(err, "reading past the data")
	}
	return nil
}
