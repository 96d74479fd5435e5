package data

import (
	"fmt"
	"math"
)

// MaxDenseElements is the largest Rows×Cols that Sparse.ToDense converts.
const MaxDenseElements = 1 << 31

// Sparse.ToDense also refuses to expand data more than MaxDenseExpansion
// times (Rows×Cols against Rows+nonzeros, what the input had to spell out)
// once the result passes MinDenseLimit values: a 4 KB LIBSVM file of 2048
// empty rows and one feature index 2^20 would otherwise become 8 GB.
const (
	MaxDenseExpansion = 1024
	MinDenseLimit     = 1 << 26
)

// Sparse is a labelled sparse dataset in CSR form. Row i has the nonzeros
// Indices[Indptr[i]:Indptr[i+1]] (column numbers in [0, Cols), strictly
// ascending) with values Values[Indptr[i]:Indptr[i+1]]; its class label is
// Y[i] in [0, Classes). len(Indptr) == Rows+1, Indptr[0] == 0 and
// Indptr[Rows] == len(Indices) == len(Values).
//
// LabelValues, when not nil, records the label each class had in the source:
// class k was written LabelValues[k] (e.g. [-1 1] for a ±1 LIBSVM file).
// Pass it as LIBSVMOptions.Labels to parse a test file the same way.
type Sparse struct {
	Indptr  []int64
	Indices []int32
	Values  []float32
	Y       []int32
	Rows    int
	Cols    int
	Classes int

	LabelValues []int64
}

// NNZ is the number of stored nonzeros.
func (s *Sparse) NNZ() int { return len(s.Indices) }

// Row returns the column indices and values of sample i; both alias s.
func (s *Sparse) Row(i int) (indices []int32, values []float32) {
	lo, hi := s.Indptr[i], s.Indptr[i+1]
	return s.Indices[lo:hi:hi], s.Values[lo:hi:hi]
}

// Validate checks the CSR invariants documented on Sparse, that values are
// finite and that labels lie in [0, Classes).
func (s *Sparse) Validate() error {
	if s.Rows < 0 || s.Cols < 0 || s.Classes < 0 {
		return errorf(ErrFormat, "sparse: negative size rows=%d cols=%d classes=%d", s.Rows, s.Cols, s.Classes)
	}
	if len(s.Indptr) != s.Rows+1 {
		return errorf(ErrFormat, "sparse: len(Indptr)=%d, want rows+1 = %d", len(s.Indptr), s.Rows+1)
	}
	if len(s.Y) != s.Rows {
		return errorf(ErrFormat, "sparse: len(Y)=%d, want rows = %d", len(s.Y), s.Rows)
	}
	if len(s.Values) != len(s.Indices) {
		return errorf(ErrFormat, "sparse: len(Values)=%d != len(Indices)=%d", len(s.Values), len(s.Indices))
	}
	if s.Indptr[0] != 0 || s.Indptr[s.Rows] != int64(len(s.Indices)) {
		return errorf(ErrFormat, "sparse: Indptr runs from %d to %d, want 0 to %d", s.Indptr[0], s.Indptr[s.Rows], len(s.Indices))
	}
	for i := 0; i < s.Rows; i++ {
		lo, hi := s.Indptr[i], s.Indptr[i+1]
		if lo > hi || hi > int64(len(s.Indices)) {
			return errorf(ErrFormat, "sparse: row %d: Indptr goes from %d to %d, want non-decreasing within [0, %d]", i, lo, hi, len(s.Indices))
		}
		prev := int32(-1)
		for k := lo; k < hi; k++ {
			c := s.Indices[k]
			if c <= prev || int(c) >= s.Cols {
				return errorf(ErrFormat, "sparse: row %d: column %d after %d, want ascending in [0, %d)", i, c, prev, s.Cols)
			}
			prev = c
			if v := float64(s.Values[k]); math.IsNaN(v) || math.IsInf(v, 0) {
				return errorf(ErrFormat, "sparse: row %d column %d is %v", i, c, v)
			}
		}
	}
	if s.LabelValues != nil && len(s.LabelValues) != s.Classes {
		return errorf(ErrFormat, "sparse: %d label values for %d classes", len(s.LabelValues), s.Classes)
	}
	if err := checkLabels(s.Y, s.Classes); err != nil {
		return fmt.Errorf("sparse: %w", err)
	}
	return nil
}

// Gather makes dst the mini-batch of samples idx[0], idx[1], … (in that
// order): dst.Rows = len(idx) and dst's CSR arrays and labels are rewritten,
// reusing their capacity, so once dst has grown to the largest batch Gather
// allocates nothing. Cols, Classes and LabelValues are copied from s
// (LabelValues shares s's array). Indices are checked before dst is touched.
func (s *Sparse) Gather(dst *Sparse, idx []int) error {
	if err := checkIndices(idx, s.Rows); err != nil {
		return fmt.Errorf("sparse gather: %w", err)
	}
	dst.Rows, dst.Cols, dst.Classes, dst.LabelValues = len(idx), s.Cols, s.Classes, s.LabelValues
	dst.Indptr = append(dst.Indptr[:0], 0)
	dst.Indices = dst.Indices[:0]
	dst.Values = dst.Values[:0]
	dst.Y = dst.Y[:0]
	for _, i := range idx {
		lo, hi := s.Indptr[i], s.Indptr[i+1]
		dst.Indices = append(dst.Indices, s.Indices[lo:hi]...)
		dst.Values = append(dst.Values, s.Values[lo:hi]...)
		dst.Indptr = append(dst.Indptr, int64(len(dst.Indices)))
		dst.Y = append(dst.Y, s.Y[i])
	}
	return nil
}

// Subset returns a new Sparse holding copies of the samples rows[0],
// rows[1], … in that order (a row may repeat).
func (s *Sparse) Subset(rows []int) (*Sparse, error) {
	nnz := 0
	for _, i := range rows {
		if i >= 0 && i < s.Rows {
			nnz += int(s.Indptr[i+1] - s.Indptr[i])
		}
	}
	out := &Sparse{
		Indptr:  make([]int64, 0, len(rows)+1),
		Indices: make([]int32, 0, nnz),
		Values:  make([]float32, 0, nnz),
		Y:       make([]int32, 0, len(rows)),
	}
	if err := s.Gather(out, rows); err != nil {
		return nil, fmt.Errorf("sparse subset: %w", err)
	}
	return out, nil
}

// ToDense expands s into a Dense with the same rows, labels and classes.
// It fails with ErrTooLarge when Rows×Cols exceeds MaxDenseElements, or
// exceeds both MinDenseLimit and MaxDenseExpansion × (Rows + nonzeros).
func (s *Sparse) ToDense() (*Dense, error) {
	if s.Cols > 0 && s.Rows > MaxDenseElements/s.Cols {
		return nil, errorf(ErrTooLarge, "sparse to dense: %d rows × %d cols exceeds %d elements", s.Rows, s.Cols, MaxDenseElements)
	}
	if n, given := int64(s.Rows)*int64(s.Cols), int64(s.Rows)+int64(len(s.Values)); n > MinDenseLimit && n > MaxDenseExpansion*given {
		return nil, errorf(ErrTooLarge, "sparse to dense: %d rows × %d cols = %d values from %d nonzeros, more than %d times the data given: train on it sparse (sparse-logreg) or check the largest feature index",
			s.Rows, s.Cols, n, len(s.Values), MaxDenseExpansion)
	}
	d := &Dense{
		X:           make([]float32, s.Rows*s.Cols),
		Y:           append([]int32(nil), s.Y...),
		Rows:        s.Rows,
		Cols:        s.Cols,
		Classes:     s.Classes,
		LabelValues: s.LabelValues,
	}
	for i := 0; i < s.Rows; i++ {
		row := d.X[i*s.Cols : (i+1)*s.Cols]
		for k := s.Indptr[i]; k < s.Indptr[i+1]; k++ {
			row[s.Indices[k]] = s.Values[k]
		}
	}
	return d, nil
}
