package data

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Augment is the standard augmentation of image data (--augment): a
// random crop of the image padded by CropPad zero pixels on every side
// (back to its own size: an offset of 0…2·CropPad in each direction), and
// a horizontal flip with probability ½. What a sample gets is a function
// of (seed, epoch, the sample's index in the whole training set) only, so
// a resumed run, and a run on any number of ranks, transforms every sample
// alike.
type Augment struct {
	CropPad int  // 0: no crop
	Flip    bool // mirror left-right half of the time
}

// ParseAugment reads "crop", "flip", "crop,flip" ("" or "none": none).
func ParseAugment(s string) (Augment, error) {
	var a Augment
	for _, f := range strings.Split(s, ",") {
		switch strings.TrimSpace(f) {
		case "", "none":
		case "crop":
			a.CropPad = 4
		case "flip":
			a.Flip = true
		default:
			return Augment{}, fmt.Errorf("%q: unknown augmentation %q (want crop, flip, or both: crop,flip)", s, f)
		}
	}
	return a, nil
}

// On reports whether a does anything.
func (a Augment) On() bool { return a.CropPad > 0 || a.Flip }

// String is ParseAugment's form.
func (a Augment) String() string {
	var p []string
	if a.CropPad > 0 {
		p = append(p, "crop")
	}
	if a.Flip {
		p = append(p, "flip")
	}
	if len(p) == 0 {
		return "none"
	}
	return strings.Join(p, ",")
}

// Apply transforms rows of images of shape s in x (row-major, one image
// per row) in place; sample[i] is row i's index in the whole training set.
// scratch, if long enough, holds one image (nil: allocated).
func (a Augment) Apply(x []float32, s Shape, sample []int, seed uint64, epoch int, scratch []float32) []float32 {
	n := s.Size()
	if len(scratch) < n {
		scratch = make([]float32, n)
	}
	tmp := scratch[:n]
	for i, g := range sample {
		r := rand.New(newPCG(seed^uint64(epoch)*0x9E3779B97F4A7C15, streamAugment+uint64(g)))
		dy, dx := 0, 0
		if a.CropPad > 0 {
			dy, dx = r.IntN(2*a.CropPad+1)-a.CropPad, r.IntN(2*a.CropPad+1)-a.CropPad
		}
		flip := a.Flip && r.IntN(2) == 1
		if dy == 0 && dx == 0 && !flip {
			continue
		}
		img := x[i*n : (i+1)*n]
		copy(tmp, img)
		for c := range s.C {
			plane, src := img[c*s.H*s.W:(c+1)*s.H*s.W], tmp[c*s.H*s.W:(c+1)*s.H*s.W]
			for y := range s.H {
				sy := y + dy
				row := plane[y*s.W : (y+1)*s.W]
				if sy < 0 || sy >= s.H {
					clear(row)
					continue
				}
				for xx := range s.W {
					sx := xx
					if flip {
						sx = s.W - 1 - xx
					}
					sx += dx
					if sx < 0 || sx >= s.W {
						row[xx] = 0
					} else {
						row[xx] = src[sy*s.W+sx]
					}
				}
			}
		}
	}
	return scratch
}
