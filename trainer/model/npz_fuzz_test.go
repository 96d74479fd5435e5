package model

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dml-project/dml/trainer/internal/inflate"
)

// FuzzReadNPZ: no input panics or allocates more than inflate.Limit of its
// size for the weights; an accepted file is a consistent, finite network
// that survives WriteNPZ and ReadNPZ again bit for bit. Seed corpus beyond
// these: testdata/fuzz/FuzzReadNPZ (files numpy wrote, hostile headers).
func FuzzReadNPZ(f *testing.F) {
	good := oneLayer("layer0.weight", "layer0.bias")
	f.Add(buildNPZ(f, good...))
	f.Add(buildNPZ(f, oneLayer("layer0.weight.npy", "layer0.bias.npy")...))
	f.Add(buildNPZ(f, entry{name: "layer0.weight", data: good[0].data, deflate: true}, entry{name: "layer0.bias", data: good[1].data, deflate: true}))
	f.Add(buildNPZ(f, entry{name: "layer0.weight", data: npyBytes("<f4", "True", "(3, 2)", f32(1, 3, 5, 2, 4, 6))}, good[1]))
	f.Add(buildNPZ(f, entry{name: "layer0.weight", data: npyBytes("<f4", "False", "(4000000000, 1500000000)", f32(1, 2))}, good[1]))
	f.Add(buildNPZ(f, entry{name: "layer0.weight", data: npyBytes("<f4", "False", "(3, 2)", f32(1, 2, 3, 4, 5))}, good[1]))
	var saved bytes.Buffer
	arch, _ := NewArch(3, []int{2}, 1, SigmoidCE)
	if err := WriteNPZ(&saved, arch, arch.InitParams(1)); err != nil {
		f.Fatal(err)
	}
	f.Add(saved.Bytes())
	f.Fuzz(func(t *testing.T, in []byte) {
		arch, p, err := ReadNPZ(bytes.NewReader(in), int64(len(in)))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		if len(p) != arch.NumParams() || !AllFinite(p) {
			t.Fatalf("accepted %d params for sizes %v (finite: %v)", len(p), arch.Sizes, AllFinite(p))
		}
		if int64(4*len(p)) > inflate.Limit(int64(len(in))) {
			t.Fatalf("%d params from a %d-byte file", len(p), len(in))
		}
		var buf bytes.Buffer
		if err := WriteNPZ(&buf, arch, p); err != nil {
			t.Fatal(err)
		}
		arch2, q, err := ReadNPZ(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatalf("our own file of sizes %v: %v", arch.Sizes, err)
		}
		if len(arch2.Sizes) != len(arch.Sizes) || arch2.Loss != arch.Loss || len(q) != len(p) {
			t.Fatalf("round trip: sizes %v → %v", arch.Sizes, arch2.Sizes)
		}
		for i := range p {
			if q[i] != p[i] {
				t.Fatalf("round trip: param %d %v → %v", i, p[i], q[i])
			}
		}
	})
}
