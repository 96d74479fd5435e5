package data

import (
	"fmt"
	"strconv"
	"strings"
)

// Shape is one sample's shape: C channels of H×W, row-major (PyTorch's
// NCHW without the batch). A flat vector of n features is n×1×1.
type Shape struct {
	C int `json:"c"`
	H int `json:"h"`
	W int `json:"w"`
}

// Size is the number of values.
func (s Shape) Size() int { return s.C * s.H * s.W }

// Flat reports whether s is a vector (H = W = 1).
func (s Shape) Flat() bool { return s.H == 1 && s.W == 1 }

func (s Shape) String() string {
	if s.Flat() {
		return strconv.Itoa(s.C)
	}
	return fmt.Sprintf("%d×%d×%d", s.C, s.H, s.W)
}

// ParseShape reads "CxHxW" (or "HxW", one channel), each a positive
// integer; "x" or "×" separates them.
func ParseShape(s string) (Shape, error) {
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return r == 'x' || r == '×' })
	var d []int
	for _, p := range f {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v <= 0 || v > 1<<20 {
			return Shape{}, fmt.Errorf("shape %q: want CxHxW of positive integers, e.g. 3x32x32", s)
		}
		d = append(d, v)
	}
	switch len(d) {
	case 2:
		return Shape{C: 1, H: d[0], W: d[1]}, nil
	case 3:
		return Shape{C: d[0], H: d[1], W: d[2]}, nil
	}
	return Shape{}, fmt.Errorf("shape %q: want CxHxW (or HxW), e.g. 3x32x32", s)
}

// Imager is a source whose samples are images: it knows their shape.
type Imager interface {
	SampleShape() Shape
}

// SampleShape is the shape of s's samples: an image source's (IDX
// images: 1×H×W), else a flat vector of its features.
func SampleShape(s DenseSource) Shape {
	if im, ok := s.(Imager); ok {
		return im.SampleShape()
	}
	_, cols, _ := s.Shape()
	return Shape{C: cols, H: 1, W: 1}
}

// SampleShape is the images' shape: 1×H×W for an IDX file of [N, H, W],
// C×H×W for [N, C, H, W], flat otherwise.
func (s *IDXSource) SampleShape() Shape {
	switch d := s.dims[1:]; len(d) {
	case 2:
		return Shape{C: 1, H: d[0], W: d[1]}
	case 3:
		return Shape{C: d[0], H: d[1], W: d[2]}
	}
	return Shape{C: s.cols, H: 1, W: 1}
}
