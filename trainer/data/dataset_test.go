package data

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// rampDense is a rows×cols Dense with X[i, j] = i*cols + j and Y[i] = i % classes.
func rampDense(rows, cols, classes int) *Dense {
	d := &Dense{X: make([]float32, rows*cols), Y: make([]int32, rows), Rows: rows, Cols: cols, Classes: classes}
	for i := range d.X {
		d.X[i] = float32(i)
	}
	for i := range d.Y {
		d.Y[i] = int32(i % classes)
	}
	return d
}

func TestDenseGather(t *testing.T) {
	d := rampDense(6, 3, 4)
	idx := []int{4, 0, 4, 5}
	x := make([]float32, 5*3) // room for a larger batch: the tail stays untouched
	y := make([]int32, 5)
	for i := range x {
		x[i] = -1
	}
	y[4] = -1
	if err := d.Gather(x, y, idx); err != nil {
		t.Fatal(err)
	}
	wantX := []float32{12, 13, 14, 0, 1, 2, 12, 13, 14, 15, 16, 17, -1, -1, -1}
	if !slices.Equal(x, wantX) || !slices.Equal(y, []int32{0, 0, 0, 1, -1}) {
		t.Fatalf("x=%v y=%v", x, y)
	}
	if got := d.Row(2); !slices.Equal(got, []float32{6, 7, 8}) || cap(got) != 3 {
		t.Fatalf("Row(2) = %v cap %d", got, cap(got))
	}
	if err := d.Gather(x[:3], nil, []int{5}); err != nil || !slices.Equal(x[:3], []float32{15, 16, 17}) {
		t.Fatalf("nil labels: %v %v", err, x[:3])
	}
	if n := testing.AllocsPerRun(10, func() { _ = d.Gather(x, y, idx) }); n != 0 {
		t.Errorf("Gather allocates %v times", n)
	}

	sub, err := d.Subset([]int{5, 1})
	if err != nil || sub.Rows != 2 || !slices.Equal(sub.X, []float32{15, 16, 17, 3, 4, 5}) || !slices.Equal(sub.Y, []int32{1, 1}) {
		t.Fatalf("Subset: %v %+v", err, sub)
	}
	empty, err := d.Subset(nil)
	if err != nil || empty.Rows != 0 || empty.Validate() != nil {
		t.Fatalf("empty Subset: %v %+v", err, empty)
	}

	for _, tc := range []struct {
		name string
		x    []float32
		y    []int32
		idx  []int
		kind error
	}{
		{"short x", make([]float32, 5), nil, []int{0, 1}, ErrShortBuffer},
		{"short y", make([]float32, 6), make([]int32, 1), []int{0, 1}, ErrShortBuffer},
		{"index high", make([]float32, 6), nil, []int{0, 6}, ErrIndex},
		{"index negative", make([]float32, 6), nil, []int{-1}, ErrIndex},
	} {
		before := slices.Clone(tc.x)
		if err := d.Gather(tc.x, tc.y, tc.idx); !errors.Is(err, tc.kind) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.kind)
		}
		if !slices.Equal(before, tc.x) {
			t.Errorf("%s: dst written before the error", tc.name)
		}
	}
	if _, err := d.Subset([]int{7}); !errors.Is(err, ErrIndex) {
		t.Errorf("Subset out of range: %v", err)
	}
}

func TestDenseValidate(t *testing.T) {
	good := rampDense(3, 2, 3)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		corrupt func(d *Dense)
	}{
		{"short X", func(d *Dense) { d.X = d.X[:5] }},
		{"short Y", func(d *Dense) { d.Y = d.Y[:2] }},
		{"label high", func(d *Dense) { d.Y[1] = 3 }},
		{"label negative", func(d *Dense) { d.Y[1] = -1 }},
		{"NaN", func(d *Dense) { d.X[4] = float32(math.NaN()) }},
		{"Inf", func(d *Dense) { d.X[0] = float32(math.Inf(-1)) }},
		{"negative rows", func(d *Dense) { d.Rows = -1 }},
	} {
		d := rampDense(3, 2, 3)
		tc.corrupt(d)
		if err := d.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", tc.name)
		}
	}
}

// testSparse is a 4×6 CSR matrix with distinct values and an empty row:
//
//	row 0: (1, 1) (4, 2)
//	row 1: (0, 3) (2, 4) (5, 5)
//	row 2: —
//	row 3: (3, 6)
func testSparse() *Sparse {
	return &Sparse{
		Indptr:  []int64{0, 2, 5, 5, 6},
		Indices: []int32{1, 4, 0, 2, 5, 3},
		Values:  []float32{1, 2, 3, 4, 5, 6},
		Y:       []int32{0, 2, 1, 2},
		Rows:    4, Cols: 6, Classes: 3,
	}
}

func TestSparseGather(t *testing.T) {
	s := testSparse()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	var b Sparse
	if err := s.Gather(&b, []int{3, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	assertSparseEqual(t, &b, &Sparse{
		Indptr:  []int64{0, 1, 4, 4, 5},
		Indices: []int32{3, 0, 2, 5, 3},
		Values:  []float32{6, 3, 4, 5, 6},
		Y:       []int32{2, 2, 1, 2},
		Rows:    4, Cols: 6, Classes: 3,
	})
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	// A smaller batch reuses the buffers.
	if err := s.Gather(&b, []int{0}); err != nil {
		t.Fatal(err)
	}
	assertSparseEqual(t, &b, &Sparse{Indptr: []int64{0, 2}, Indices: []int32{1, 4}, Values: []float32{1, 2}, Y: []int32{0}, Rows: 1, Cols: 6, Classes: 3})
	idx := []int{1, 0, 3, 2}
	if n := testing.AllocsPerRun(10, func() { _ = s.Gather(&b, idx) }); n != 0 {
		t.Errorf("Gather into a grown batch allocates %v times", n)
	}
	if err := s.Gather(&b, []int{4}); !errors.Is(err, ErrIndex) || b.Rows != 4 {
		t.Errorf("out of range: %v, batch rows %d (want untouched 4)", err, b.Rows)
	}

	ind, val := s.Row(1)
	if !slices.Equal(ind, []int32{0, 2, 5}) || !slices.Equal(val, []float32{3, 4, 5}) {
		t.Fatalf("Row(1) = %v %v", ind, val)
	}
	if ind, _ := s.Row(2); len(ind) != 0 {
		t.Fatalf("Row(2) = %v, want empty", ind)
	}
	sub, err := s.Subset([]int{2, 0})
	if err != nil {
		t.Fatal(err)
	}
	assertSparseEqual(t, sub, &Sparse{Indptr: []int64{0, 0, 2}, Indices: []int32{1, 4}, Values: []float32{1, 2}, Y: []int32{1, 0}, Rows: 2, Cols: 6, Classes: 3})
}

func TestSparseToDense(t *testing.T) {
	d, err := testSparse().ToDense()
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{
		0, 1, 0, 0, 2, 0,
		3, 0, 4, 0, 0, 5,
		0, 0, 0, 0, 0, 0,
		0, 0, 0, 6, 0, 0,
	}
	if !slices.Equal(d.X, want) || !slices.Equal(d.Y, []int32{0, 2, 1, 2}) || d.Classes != 3 {
		t.Fatalf("ToDense = %+v", d)
	}
	big := &Sparse{Indptr: make([]int64, 1<<20+1), Y: make([]int32, 1<<20), Rows: 1 << 20, Cols: 1<<11 + 1, Classes: 2}
	if _, err := big.ToDense(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%d×%d: got %v, want ErrTooLarge", big.Rows, big.Cols, err)
	}
}

func TestSparseValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(s *Sparse)
	}{
		{"indptr short", func(s *Sparse) { s.Indptr = s.Indptr[:4] }},
		{"indptr start", func(s *Sparse) { s.Indptr[0] = 1 }},
		{"indptr beyond", func(s *Sparse) { s.Indptr[1] = 9 }},
		{"indptr decreasing", func(s *Sparse) { s.Indptr[2] = 1 }},
		{"values short", func(s *Sparse) { s.Values = s.Values[:5] }},
		{"unsorted", func(s *Sparse) { s.Indices[2], s.Indices[3] = 2, 0 }},
		{"duplicate", func(s *Sparse) { s.Indices[3] = 0 }},
		{"column beyond", func(s *Sparse) { s.Indices[4] = 6 }},
		{"negative column", func(s *Sparse) { s.Indices[0] = -1 }},
		{"NaN", func(s *Sparse) { s.Values[0] = float32(math.NaN()) }},
		{"label", func(s *Sparse) { s.Y[0] = 3 }},
		{"label values", func(s *Sparse) { s.LabelValues = []int64{1} }},
	} {
		s := testSparse()
		tc.corrupt(s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", tc.name)
		}
	}
}
