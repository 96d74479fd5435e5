package model

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// The .npy format (numpy.lib.format), one array per .npz entry:
//
//	"\x93NUMPY" major minor          8 bytes
//	header length                    uint16 LE (version 1) or uint32 LE (2, 3)
//	header                           a Python dict literal, padded with spaces, ending '\n':
//	                                 {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
//	data                             product(shape) × itemsize bytes
//
// parseNPYHeader reads the dict strictly: exactly the three keys, each once,
// a descr string, True or False, a tuple of non-negative integers (a
// one-element tuple needs its comma, as in Python), nothing else but spaces
// and the final newline.

const (
	npyMagic = "\x93NUMPY"
	// maxNPYHeader bounds the header length field, read before anything
	// is allocated (numpy's own reader refuses headers over 10000 bytes
	// unless told otherwise; the headers it writes are < 200 bytes).
	maxNPYHeader = 1 << 16
	// maxNPYDims is numpy's NPY_MAXDIMS.
	maxNPYDims = 32
)

// npyHeader is a parsed .npy header.
type npyHeader struct {
	descr   string
	fortran bool
	shape   []int
	// dataOff is where the data starts: the preamble and header length.
	dataOff int64
}

// elems is the product of the shape, or -1 when it overflows max.
func (h npyHeader) elems(max int64) int64 {
	n := int64(1)
	for _, d := range h.shape {
		if d != 0 && n > max/int64(d) {
			return -1
		}
		n *= int64(d)
	}
	return n
}

// npyDtype is a float type this reader converts to float32.
type npyDtype struct {
	size      int
	bigEndian bool
}

// dtypeOf accepts little- and big-endian float32 and float64 ('<f4',
// '>f4', '<f8', '>f8'; '=' and '|' are not what numpy writes for floats).
func dtypeOf(descr string) (npyDtype, error) {
	switch descr {
	case "<f4":
		return npyDtype{4, false}, nil
	case ">f4":
		return npyDtype{4, true}, nil
	case "<f8":
		return npyDtype{8, false}, nil
	case ">f8":
		return npyDtype{8, true}, nil
	}
	return npyDtype{}, fmt.Errorf("dtype %q is not supported (want float32 '<f4' or float64 '<f8')", descr)
}

// readNPYPreamble parses the magic, the version and the header length from
// the first bytes of an entry (10, or 12 for versions 2 and 3; fewer when
// the entry is shorter) and returns the header's length and where it
// starts.
func readNPYPreamble(b []byte) (hlen, start int, err error) {
	if len(b) < 10 || string(b[:6]) != npyMagic {
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
		if n > maxNPYHeader {
			return 0, 0, fmt.Errorf(".npy header of %d bytes (at most %d accepted)", n, maxNPYHeader)
		}
		return int(n), 12, nil
	}
	return 0, 0, fmt.Errorf(".npy format version %d.%d is not supported (want 1, 2 or 3)", b[6], b[7])
}

// parseNPYHeader parses the header dict (see above).
func parseNPYHeader(text string) (npyHeader, error) {
	p := &dictParser{s: text}
	var h npyHeader
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
			if h.descr, ok = p.str(); !ok {
				return h, p.fail("descr: want a quoted dtype such as '<f4'")
			}
		case "fortran_order":
			switch {
			case p.word("True"):
				h.fortran = true
			case p.word("False"):
			default:
				return h, p.fail("fortran_order: want True or False")
			}
		case "shape":
			var err error
			if h.shape, err = p.tuple(); err != nil {
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
		if len(shape) == maxNPYDims {
			return nil, p.fail(fmt.Sprintf("shape: more than %d dimensions", maxNPYDims))
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
