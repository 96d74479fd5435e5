package model

import (
	"errors"
	"slices"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
)

// TestStateCaptureRestore: a State captured from a backend's buffers
// restores them exactly, reuses its slices, leaves absent parts nil, and
// refuses a buffer of another length before writing anything.
func TestStateCaptureRestore(t *testing.T) {
	b := cpu.New()
	buf := func(v ...float32) kernels.Buffer {
		x, err := b.Alloc(len(v))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Upload(x, v); err != nil {
			t.Fatal(err)
		}
		return x
	}
	p, o, s := buf(1, 2, 3), buf(4, 5), buf(6)
	var st State
	if err := st.Capture(b, p, o, s); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Params, []float32{1, 2, 3}) || !slices.Equal(st.Opt, []float32{4, 5}) || !slices.Equal(st.Buffers, []float32{6}) {
		t.Fatalf("captured %+v", st)
	}
	keep := &st.Params[0]
	b.Upload(p, []float32{7, 8, 9})
	if err := st.Capture(b, p, nil, s); err != nil || &st.Params[0] != keep || st.Opt != nil || st.Params[2] != 9 {
		t.Fatalf("second capture: %+v, %v (slice reused: %v)", st, err, &st.Params[0] == keep)
	}
	c := st.Clone()
	c.Params[0] = 100
	if st.Params[0] == 100 {
		t.Error("Clone shares the weights")
	}
	p2, s2 := buf(0, 0, 0), buf(0)
	if err := st.Restore(b, p2, nil, s2); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 3)
	b.Download(got, p2)
	if !slices.Equal(got, []float32{7, 8, 9}) {
		t.Errorf("restored %v", got)
	}
	short := buf(0, 0)
	if err := st.Restore(b, short, nil, nil); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("restoring 3 weights into 2: %v, want ErrShape", err)
	}
}
