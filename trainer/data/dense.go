package data

import (
	"fmt"
	"math"
)

// Dense is a labelled dense dataset: Rows samples of Cols float32 features
// each, stored row-major in X (sample i is X[i*Cols : (i+1)*Cols]), and one
// class label per sample in Y, each in [0, Classes).
type Dense struct {
	X       []float32
	Y       []int32
	Rows    int
	Cols    int
	Classes int
	// LabelValues, when not nil, is the label each class had in the source
	// (as Sparse's: a LIBSVM file's); nil means class k was labelled k.
	LabelValues []int64
	// Image, when set, is the shape of each row as an image (its Size is
	// Cols), or as a token sequence (its RowValues are Cols: text.go);
	// zero: a flat vector.
	Image Shape
}

// SampleShape is d.Image, or a flat vector of Cols (Imager).
func (d *Dense) SampleShape() Shape {
	if d.Image.RowValues() == d.Cols && d.Cols > 0 {
		return d.Image
	}
	return Shape{C: d.Cols, H: 1, W: 1}
}

// ClassLabels is d's LabelValues (nil: the identity).
func (d *Dense) ClassLabels() []int64 { return d.LabelValues }

// Row returns the features of sample i. The slice aliases d.X.
func (d *Dense) Row(i int) []float32 {
	return d.X[i*d.Cols : (i+1)*d.Cols : (i+1)*d.Cols]
}

// Validate checks the invariants every Dense from this package satisfies:
// non-negative sizes, len(X) == Rows*Cols, len(Y) == Rows, labels in
// [0, Classes) and finite features.
func (d *Dense) Validate() error {
	if d.Rows < 0 || d.Cols < 0 || d.Classes < 0 {
		return errorf(ErrFormat, "dense: negative size rows=%d cols=%d classes=%d", d.Rows, d.Cols, d.Classes)
	}
	if d.Cols > 0 && d.Rows > math.MaxInt/d.Cols {
		return errorf(ErrTooLarge, "dense: %d×%d overflows int", d.Rows, d.Cols)
	}
	if len(d.X) != d.Rows*d.Cols {
		return errorf(ErrFormat, "dense: len(X)=%d, want rows×cols = %d×%d = %d", len(d.X), d.Rows, d.Cols, d.Rows*d.Cols)
	}
	if len(d.Y) != d.Rows {
		return errorf(ErrFormat, "dense: len(Y)=%d, want rows = %d", len(d.Y), d.Rows)
	}
	if err := checkLabels(d.Y, d.Classes); err != nil {
		return fmt.Errorf("dense: %w", err)
	}
	for i, v := range d.X {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return errorf(ErrFormat, "dense: sample %d feature %d is %v", i/d.Cols, i%d.Cols, v)
		}
	}
	return nil
}

// Gather copies the samples idx[0], idx[1], … into the first len(idx) rows
// of dst (row-major, Cols wide) and their labels into dstY. dst needs at
// least len(idx)*Cols elements and dstY at least len(idx) (dstY may be nil to
// skip labels); elements past those are left untouched, so one buffer sized
// for the largest batch serves every batch. Arguments are checked before
// anything is written; Gather allocates nothing.
func (d *Dense) Gather(dst []float32, dstY []int32, idx []int) error {
	if len(dst) < len(idx)*d.Cols {
		return errorf(ErrShortBuffer, "dense gather: dst holds %d values, %d samples × %d cols need %d", len(dst), len(idx), d.Cols, len(idx)*d.Cols)
	}
	if dstY != nil && len(dstY) < len(idx) {
		return errorf(ErrShortBuffer, "dense gather: dstY holds %d labels, need %d", len(dstY), len(idx))
	}
	if err := checkIndices(idx, d.Rows); err != nil {
		return fmt.Errorf("dense gather: %w", err)
	}
	c := d.Cols
	for k, i := range idx {
		copy(dst[k*c:(k+1)*c], d.X[i*c:(i+1)*c])
		if dstY != nil {
			dstY[k] = d.Y[i]
		}
	}
	return nil
}

// Subset returns a new Dense holding copies of the samples rows[0],
// rows[1], … in that order (a row may repeat).
func (d *Dense) Subset(rows []int) (*Dense, error) {
	out := &Dense{
		X:           make([]float32, len(rows)*d.Cols),
		Y:           make([]int32, len(rows)),
		Rows:        len(rows),
		Cols:        d.Cols,
		Classes:     d.Classes,
		LabelValues: d.LabelValues,
		Image:       d.Image,
	}
	if err := d.Gather(out.X, out.Y, rows); err != nil {
		return nil, fmt.Errorf("dense subset: %w", err)
	}
	return out, nil
}

// checkLabels reports the first label outside [0, classes).
func checkLabels(y []int32, classes int) error {
	for i, l := range y {
		if l < 0 || int(l) >= classes {
			return errorf(ErrFormat, "sample %d has label %d, want [0, %d)", i, l, classes)
		}
	}
	return nil
}

// checkIndices reports the first index outside [0, n).
func checkIndices(idx []int, n int) error {
	for k, i := range idx {
		if i < 0 || i >= n {
			return errorf(ErrIndex, "idx[%d] = %d, want [0, %d)", k, i, n)
		}
	}
	return nil
}
