package data

import (
	"fmt"
	"strconv"
	"strings"
)

// Shape is one sample's shape: C channels of H×W, row-major (PyTorch's
// NCHW without the batch). A flat vector of n features is n×1×1. T > 0
// makes it a sequence of T positions, each of that shape (a transformer's
// (T, C), PyTorch's (B, T, C) without the batch); 0: not a sequence.
type Shape struct {
	C int `json:"c"`
	H int `json:"h"`
	W int `json:"w"`
	T int `json:"t,omitempty"`
}

// Size is the number of values: C·H·W per position, times T positions.
func (s Shape) Size() int { return s.C * s.H * s.W * s.Seq() }

// Seq is the positions of a sequence (T), 1 for a sample that is not one.
func (s Shape) Seq() int { return max(s.T, 1) }

// RowValues is the values a data row holds for a sample of this shape:
// Size, but a token sequence (T > 0, C = H = W = 1) holds T+1 tokens, its
// positions' inputs and, one further on, their targets (text.go).
func (s Shape) RowValues() int {
	if s.T > 0 {
		return s.Size() + 1
	}
	return s.Size()
}

// Flat reports whether s is a vector (H = W = 1), or a sequence of them.
func (s Shape) Flat() bool { return s.H == 1 && s.W == 1 }

func (s Shape) String() string {
	one := fmt.Sprintf("%d×%d×%d", s.C, s.H, s.W)
	if s.Flat() {
		one = strconv.Itoa(s.C)
	}
	if s.T > 0 {
		return fmt.Sprintf("%d×%s", s.T, one)
	}
	return one
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
