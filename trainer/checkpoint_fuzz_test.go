package trainer

import (
	"testing"

	"github.com/dml-project/dml/trainer/model"
)

// FuzzDecodeCheckpoint: no input makes decodeCheckpoint panic or allocate
// more than the input justifies (shapes are checked against the entry's
// bytes before anything is allocated), and whatever it accepts has
// weights of the size its architecture says.
func FuzzDecodeCheckpoint(f *testing.F) {
	arch, _ := model.NewArch(3, []int{2}, 2, model.SoftmaxCE)
	p := arch.InitParams(1)
	c := &checkpoint{Meta: checkpointMeta{Format: checkpointFormat, Version: checkpointVersion, Arch: arch, Position: Position{Epoch: 1}},
		Params: p, OptState: make([]float32, len(p)), Residues: [][]float32{make([]float32, len(p))}}
	good, err := c.encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte("PK\x03\x04"))
	f.Add(npyFloat32([]float32{1, 2}, 2))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCheckpoint(b)
		if err != nil {
			return
		}
		if len(c.Params) != c.Meta.Arch.NumParams() {
			t.Fatalf("accepted %d weights for %v", len(c.Params), c.Meta.Arch.Sizes)
		}
	})
}

// TestNpyRoundTrip: npyFloat32 and parseNpyFloat32 agree, headers are
// 64-byte aligned, and bad headers or lengths are refused.
func TestNpyRoundTrip(t *testing.T) {
	v := []float32{1, -2, 3.5, 0, 5, 6}
	for _, shape := range [][]int{{6}, {2, 3}, {3, 2}} {
		b := npyFloat32(v, shape...)
		if (len(b)-4*len(v))%64 != 0 {
			t.Errorf("shape %v: header of %d bytes is not 64-aligned", shape, len(b)-4*len(v))
		}
		got, sh, err := parseNpyFloat32(b)
		if err != nil || len(sh) != len(shape) || len(got) != len(v) || got[2] != 3.5 {
			t.Errorf("shape %v: %v %v %v", shape, got, sh, err)
		}
		if _, _, err := parseNpyFloat32(b[:len(b)-1]); err == nil {
			t.Errorf("shape %v: a short array was accepted", shape)
		}
	}
	if _, _, err := parseNpyFloat32([]byte("\x93NUMPY\x01\x00\x20\x00{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }")); err == nil {
		t.Error("float64 accepted")
	}
}
