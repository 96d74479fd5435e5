package data

import (
	"slices"
	"testing"
)

// TestAugment: crops move the image by at most the padding and fill with
// zeros, flips mirror rows, every transform keeps the shape, and what a
// sample gets depends on (seed, epoch, its index) only, not on the batch
// it comes in.
func TestAugment(t *testing.T) {
	s := Shape{C: 2, H: 5, W: 6}
	n := s.Size()
	img := func(k int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(k*1000 + i + 1) // no zeros
		}
		return v
	}
	a, err := ParseAugment("crop,flip")
	if err != nil || a.CropPad != 4 || !a.Flip || a.String() != "crop,flip" {
		t.Fatalf("ParseAugment: %+v %v", a, err)
	}
	if _, err := ParseAugment("crop,rotate"); err == nil {
		t.Error("rotate accepted")
	}
	// Samples 7 and 9 in one batch, then each alone, in another order.
	batch := append(img(7), img(9)...)
	a.Apply(batch, s, []int{7, 9}, 1, 3, nil)
	for k, g := range []int{7, 9} {
		one := img(g)
		a.Apply(one, s, []int{g}, 1, 3, nil)
		if !slices.Equal(one, batch[k*n:(k+1)*n]) {
			t.Errorf("sample %d transformed differently alone and in a batch", g)
		}
	}
	// Over many samples: each output is the input shifted by (dy, dx) in
	// [-4, 4], mirrored or not, zero outside; both flips and several
	// offsets occur.
	flips, shifts := map[bool]int{}, map[[2]int]bool{}
	for g := range 200 {
		in, out := img(g), img(g)
		a.Apply(out, s, []int{g}, 5, 1, nil)
		found := false
		for _, flip := range []bool{false, true} {
			for dy := -4; dy <= 4 && !found; dy++ {
				for dx := -4; dx <= 4 && !found; dx++ {
					if slices.Equal(out, shifted(in, s, dy, dx, flip)) {
						found = true
						flips[flip]++
						shifts[[2]int{dy, dx}] = true
					}
				}
			}
		}
		if !found {
			t.Fatalf("sample %d: not a crop of its padded image, mirrored or not", g)
		}
	}
	if flips[true] < 60 || flips[false] < 60 || len(shifts) < 30 {
		t.Errorf("flips %v, %d distinct offsets of 81: not random enough", flips, len(shifts))
	}
	// Another epoch transforms differently; the same epoch alike.
	e1, e1b, e2 := img(3), img(3), img(3)
	a.Apply(e1, s, []int{3}, 5, 1, nil)
	a.Apply(e1b, s, []int{3}, 5, 1, nil)
	a.Apply(e2, s, []int{3}, 5, 2, nil)
	if !slices.Equal(e1, e1b) {
		t.Error("the same (seed, epoch, sample) transformed differently")
	}
	diff := 0
	for e := 2; e < 12; e++ {
		x := img(3)
		a.Apply(x, s, []int{3}, 5, e, nil)
		if !slices.Equal(x, e1) {
			diff++
		}
	}
	if diff < 5 {
		t.Errorf("only %d of 10 other epochs transformed sample 3 differently", diff)
	}
}

// shifted is in cropped at offset (dy, dx) of its zero-padded self,
// mirrored first when flip.
func shifted(in []float32, s Shape, dy, dx int, flip bool) []float32 {
	out := make([]float32, len(in))
	for c := range s.C {
		for y := range s.H {
			for x := range s.W {
				sx := x
				if flip {
					sx = s.W - 1 - x
				}
				sy, sx := y+dy, sx+dx
				if sy >= 0 && sy < s.H && sx >= 0 && sx < s.W {
					out[(c*s.H+y)*s.W+x] = in[(c*s.H+sy)*s.W+sx]
				}
			}
		}
	}
	return out
}
