package ckpt

import (
	"testing"

	"github.com/dml-project/dml/internal/npy"
	"github.com/dml-project/dml/trainer/model"
)

// FuzzDecodeCheckpoint: no input makes Decode panic or allocate
// more than the input justifies (shapes are checked against the entry's
// bytes before anything is allocated), and whatever it accepts has
// weights of the size its architecture says.
func FuzzDecodeCheckpoint(f *testing.F) {
	arch, _ := model.NewArch(3, []int{2}, 2, model.SoftmaxCE)
	p := arch.InitParams(1)
	c := &File{Meta: Meta{Format: Format, Version: Version, Arch: arch, Position: Position{Epoch: 1}},
		State: model.State{Params: p, Opt: make([]float32, len(p))}, Residues: [][]float32{make([]float32, len(p))}}
	good, err := c.Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte("PK\x03\x04"))
	f.Add(npy.Float32([]float32{1, 2}, 2))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Decode(b)
		if err != nil {
			return
		}
		if len(c.Params) != c.Meta.Arch.NumParams() {
			t.Fatalf("accepted %d weights for %v", len(c.Params), c.Meta.Arch.Sizes)
		}
	})
}
