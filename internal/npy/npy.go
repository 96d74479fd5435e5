// Package npy is dml's one .npy/.npz codec (numpy.lib.format): the
// strict reader of --save files, of eval's --weights and of checkpoints,
// and the writer of all three.
//
//	"\x93NUMPY" major minor          8 bytes
//	header length                    uint16 LE (version 1) or uint32 LE (2, 3)
//	header                           a Python dict literal, padded with spaces, ending '\n':
//	                                 {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
//	data                             product(shape) × itemsize bytes
//
// ParseHeader reads the dict strictly: exactly the three keys, each once,
// a descr string, True or False, a tuple of non-negative integers (a
// one-element tuple needs its comma, as in Python), nothing else but spaces
// and the final newline. The reader takes float32 and float64, either
// byte order, C or Fortran order; the writer writes little-endian C-order
// arrays in format 2.0, byte for byte as github.com/sbinet/npyio did for
// --save before this package (so that saved weights stay byte-identical:
// TestWriterMatchesNpyio).
package npy

import (
	"archive/zip"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

const (
	Magic = "\x93NUMPY"
	// MaxHeader bounds the header length field, read before anything
	// is allocated (numpy's own reader refuses headers over 10000 bytes
	// unless told otherwise; the headers it writes are < 200 bytes).
	MaxHeader = 1 << 16
	// MaxDims is numpy's NPY_MAXDIMS.
	MaxDims = 32
)

// Header is a parsed .npy header.
type Header struct {
	Descr   string
	Fortran bool
	Shape   []int
	// DataOff is where the data starts: the preamble and header length.
	DataOff int64
}

// Elems is the product of the shape, or -1 when it overflows max.
func (h Header) Elems(max int64) int64 {
	n := int64(1)
	for _, d := range h.Shape {
		if d != 0 && n > max/int64(d) {
			return -1
		}
		n *= int64(d)
	}
	return n
}

// Dtype is a float type this reader converts to float32.
type Dtype struct {
	Size      int
	BigEndian bool
}

// DtypeOf accepts little- and big-endian float32 and float64 ('<f4',
// '>f4', '<f8', '>f8'; '=' and '|' are not what numpy writes for floats).
func DtypeOf(descr string) (Dtype, error) {
	switch descr {
	case "<f4":
		return Dtype{4, false}, nil
	case ">f4":
		return Dtype{4, true}, nil
	case "<f8":
		return Dtype{8, false}, nil
	case ">f8":
		return Dtype{8, true}, nil
	}
	return Dtype{}, fmt.Errorf("dtype %q is not supported (want float32 '<f4' or float64 '<f8')", descr)
}

// ReadPreamble parses the magic, the version and the header length from
// the first bytes of an entry (10, or 12 for versions 2 and 3; fewer when
// the entry is shorter) and returns the header's length and where it
// starts.
func ReadPreamble(b []byte) (hlen, start int, err error) {
	if len(b) < 10 || string(b[:6]) != Magic {
		return 0, 0, fmt.Errorf("not a .npy array (bad magic)")
	}
	switch b[6] {
	case 1:
		return int(binary.LittleEndian.Uint16(b[8:10])), 10, nil
	case 2, 3:
		if len(b) < 12 {
			return 0, 0, fmt.Errorf("truncated .npy header")
		}
		n := binary.LittleEndian.Uint32(b[8:12])
		if n > MaxHeader {
			return 0, 0, fmt.Errorf(".npy header of %d bytes (at most %d accepted)", n, MaxHeader)
		}
		return int(n), 12, nil
	}
	return 0, 0, fmt.Errorf(".npy format version %d.%d is not supported (want 1, 2 or 3)", b[6], b[7])
}

// ParseHeader parses the header dict (see above).
func ParseHeader(text string) (Header, error) {
	p := &dictParser{s: text}
	var h Header
	seen := map[string]bool{}
	p.space()
	if !p.eat('{') {
		return h, p.fail("want '{'")
	}
	for {
		p.space()
		if p.eat('}') {
			break
		}
		key, ok := p.str()
		if !ok {
			return h, p.fail("want a quoted key or '}'")
		}
		if seen[key] {
			return h, p.fail(fmt.Sprintf("key %q repeated", key))
		}
		seen[key] = true
		p.space()
		if !p.eat(':') {
			return h, p.fail("want ':'")
		}
		p.space()
		switch key {
		case "descr":
			if h.Descr, ok = p.str(); !ok {
				return h, p.fail("descr: want a quoted dtype such as '<f4'")
			}
		case "fortran_order":
			switch {
			case p.word("True"):
				h.Fortran = true
			case p.word("False"):
			default:
				return h, p.fail("fortran_order: want True or False")
			}
		case "shape":
			var err error
			if h.Shape, err = p.tuple(); err != nil {
				return h, err
			}
		default:
			return h, p.fail(fmt.Sprintf("unexpected key %q (want descr, fortran_order, shape)", key))
		}
		p.space()
		if p.eat('}') {
			break
		}
		if !p.eat(',') {
			return h, p.fail("want ',' or '}'")
		}
	}
	if strings.TrimRight(p.s[p.i:], " \n") != "" {
		return h, p.fail("unexpected text after '}'")
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return h, fmt.Errorf(".npy header lacks %q", k)
		}
	}
	return h, nil
}

// dictParser scans the header text.
type dictParser struct {
	s string
	i int
}

func (p *dictParser) fail(what string) error {
	return fmt.Errorf("malformed .npy header at byte %d: %s", p.i, what)
}

func (p *dictParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n') {
		p.i++
	}
}

func (p *dictParser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// word eats w when it stands alone (not followed by a letter or digit).
func (p *dictParser) word(w string) bool {
	if !strings.HasPrefix(p.s[p.i:], w) {
		return false
	}
	if j := p.i + len(w); j < len(p.s) && isAlnum(p.s[j]) {
		return false
	}
	p.i += len(w)
	return true
}

func isAlnum(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// str reads a quoted string of printable ASCII without escapes (dtype
// strings and the three keys need none).
func (p *dictParser) str() (string, bool) {
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", false
	}
	q := p.s[p.i]
	for j := p.i + 1; j < len(p.s); j++ {
		switch c := p.s[j]; {
		case c == q:
			v := p.s[p.i+1 : j]
			p.i = j + 1
			return v, true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return "", false
		}
	}
	return "", false
}

// tuple reads (), (n,) or (n, m, …) with an optional trailing comma.
func (p *dictParser) tuple() ([]int, error) {
	if !p.eat('(') {
		return nil, p.fail("shape: want a tuple such as (3, 4)")
	}
	shape := []int{}
	for {
		p.space()
		if p.eat(')') { // "()" or after a comma: "(3,)", "(3, 4,)"
			return shape, nil
		}
		start := p.i
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			if n > (1<<62)/10 {
				return nil, p.fail("shape: dimension too large")
			}
			n = n*10 + int(p.s[p.i]-'0')
			p.i++
		}
		if p.i == start {
			return nil, p.fail("shape: want a non-negative integer")
		}
		if len(shape) == MaxDims {
			return nil, p.fail(fmt.Sprintf("shape: more than %d dimensions", MaxDims))
		}
		shape = append(shape, n)
		p.space()
		if p.eat(',') {
			continue
		}
		if p.eat(')') {
			if len(shape) == 1 {
				return nil, p.fail("shape: a one-element tuple is written (n,)")
			}
			return shape, nil
		}
		return nil, p.fail("shape: want ',' or ')'")
	}
}

// Parse checks a whole in-memory .npy array (a checkpoint's entry): its
// preamble, its header, its dtype and that the data is exactly as long as
// the shape says. It returns the header and the dtype; the data is
// b[h.DataOff:].
func Parse(b []byte) (Header, Dtype, error) {
	hlen, start, err := ReadPreamble(b)
	if err != nil {
		return Header{}, Dtype{}, err
	}
	if start+hlen > len(b) {
		return Header{}, Dtype{}, fmt.Errorf(".npy header claims %d bytes, the entry holds %d in all: truncated", hlen, len(b))
	}
	h, err := ParseHeader(string(b[start : start+hlen]))
	if err != nil {
		return Header{}, Dtype{}, err
	}
	h.DataOff = int64(start + hlen)
	dt, err := DtypeOf(h.Descr)
	if err != nil {
		return Header{}, Dtype{}, err
	}
	return h, dt, CheckSize(h, dt, int64(len(b))-h.DataOff)
}

// CheckSize says whether have data bytes are exactly what h's shape of
// dtype dt needs.
func CheckSize(h Header, dt Dtype, have int64) error {
	n := h.Elems(have / int64(dt.Size))
	switch {
	case n < 0 || n*int64(dt.Size) > have:
		return fmt.Errorf("shape %v of %s needs more than the %d data bytes the entry holds: truncated or a false header", h.Shape, h.Descr, have)
	case n*int64(dt.Size) < have:
		return fmt.Errorf("shape %v of %s needs %d data bytes, the entry holds %d: trailing data", h.Shape, h.Descr, n*int64(dt.Size), have)
	}
	return nil
}

// Float32s converts len(dst) elements of dtype dt from b into dst, in the
// order they are stored.
func Float32s(dt Dtype, b []byte, dst []float32) {
	var order binary.ByteOrder = binary.LittleEndian
	if dt.BigEndian {
		order = binary.BigEndian
	}
	for i := range dst {
		if dt.Size == 4 {
			dst[i] = math.Float32frombits(order.Uint32(b[4*i:]))
		} else {
			dst[i] = float32(math.Float64frombits(order.Uint64(b[8*i:])))
		}
	}
}

// Float64s is Float32s into float64s (exact for both dtypes).
func Float64s(dt Dtype, b []byte, dst []float64) {
	var order binary.ByteOrder = binary.LittleEndian
	if dt.BigEndian {
		order = binary.BigEndian
	}
	for i := range dst {
		if dt.Size == 4 {
			dst[i] = float64(math.Float32frombits(order.Uint32(b[4*i:])))
		} else {
			dst[i] = math.Float64frombits(order.Uint64(b[8*i:]))
		}
	}
}

// RowMajor is the index in row-major order of the i-th element of a
// matrix of the header's shape as it is stored (Fortran order: element
// (r, c) is stored at c·rows + r); i itself for any other array.
func (h Header) RowMajor(i int) int {
	if h.Fortran && len(h.Shape) == 2 && h.Shape[0] > 1 && h.Shape[1] > 1 {
		rows, cols := h.Shape[0], h.Shape[1]
		return (i%rows)*cols + i/rows
	}
	return i
}

// Decode is Parse followed by the conversion of its data to float32, in
// row-major order.
func Decode(b []byte) ([]float32, []int, error) {
	h, dt, err := Parse(b)
	if err != nil {
		return nil, nil, err
	}
	n := int(h.Elems(int64(len(b))))
	raw := make([]float32, n)
	Float32s(dt, b[h.DataOff:], raw)
	if !h.Fortran {
		return raw, h.Shape, nil
	}
	v := make([]float32, n)
	for i, x := range raw {
		v[h.RowMajor(i)] = x
	}
	return v, h.Shape, nil
}

// AppendHeader appends the preamble and header of a little-endian,
// C-order array of descr and shape, in format 2.0, padded as npyio pads.
func AppendHeader(b []byte, descr string, shape []int) []byte {
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shapeString(shape))
	// npyio's padding (not numpy's alignment to 64 bytes; numpy reads it).
	pad := (len(Magic) + 6 + len(dict) + 1) % 16
	b = append(b, Magic...)
	b = append(b, 2, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(dict)+pad+1))
	b = append(b, dict...)
	b = append(b, strings.Repeat(" ", pad)...)
	return append(b, '\n')
}

func shapeString(shape []int) string {
	switch len(shape) {
	case 0:
		return "()"
	case 1:
		return fmt.Sprintf("(%d,)", shape[0])
	}
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	return "(" + strings.Join(dims, ", ") + ")"
}

// Float32 is an .npy array of v, little-endian float32, of the given shape
// (whose product must be len(v)).
func Float32(v []float32, shape ...int) []byte {
	b := AppendHeader(make([]byte, 0, 128+4*len(v)), "<f4", shape)
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// Float64 is Float32 for float64.
func Float64(v []float64, shape ...int) []byte {
	b := AppendHeader(make([]byte, 0, 128+8*len(v)), "<f8", shape)
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

// Writer writes an .npz archive: one .npy entry per array.
type Writer struct {
	zw     *zip.Writer
	method uint16
}

// NewWriter writes an archive to w with entries stored (zip.Store) or
// deflated (zip.Deflate). It does not close w.
func NewWriter(w io.Writer, method uint16) *Writer {
	return &Writer{zw: zip.NewWriter(w), method: method}
}

// Add writes one entry.
func (w *Writer) Add(name string, data []byte) error {
	f, err := w.zw.CreateHeader(&zip.FileHeader{Name: name, Method: w.method})
	if err != nil {
		return fmt.Errorf("npz: entry %q: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("npz: entry %q: %w", name, err)
	}
	return nil
}

// Close finishes the archive (its central directory).
func (w *Writer) Close() error { return w.zw.Close() }
