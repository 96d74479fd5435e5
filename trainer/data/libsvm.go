package data

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/dml-project/dml/internal/regfile"
)

// The LIBSVM text format, one sample per line:
//
//	<label> <index>:<value> <index>:<value> ... [# comment]
//
// Fields are separated by spaces or tabs. Indices are 1-based and must be
// strictly ascending within a line (the format's own rule; duplicates and
// descending indices are rejected, not sorted, since a file that breaks the
// rule is usually not the file the user meant). Index i becomes column i-1.
// Values are float32 and must be finite; explicit zeros are stored as given.
// Text from '#' to the end of the line is ignored, and lines that are blank
// after that are skipped. A line with a label and no features is an all-zero
// sample. Input may be gzip-compressed (detected by its magic bytes).
//
// Labels must be integers ("2", "+1", "-1", "3.0"; not "0.5"). Unless
// LIBSVMOptions.Labels fixes the mapping, it is inferred from the distinct
// labels of the file:
//   - all in {0, 1}: binary, class = label, LabelValues [0 1];
//   - otherwise all in {-1, +1}: binary, -1 → 0 and +1 → 1, LabelValues [-1 1];
//   - otherwise: the sorted distinct labels l_0 < l_1 < … < l_{K-1} become
//     classes 0 … K-1, LabelValues [l_0 … l_{K-1}].
//
// A file whose labels are all 1 is read as binary. A test file that lacks
// some class would infer a different mapping than its training file, so
// parse it with Labels set to the training set's LabelValues (and Cols to
// its Cols).

// maxLIBSVMLine bounds the length of one line.
const maxLIBSVMLine = 256 << 20

// LIBSVMOptions configures ParseLIBSVM. The zero value infers both the
// feature count and the label mapping from the file.
type LIBSVMOptions struct {
	// Cols fixes the number of features: every index must be ≤ Cols, and the
	// result has Cols columns even if the file uses fewer. 0 means the
	// largest index in the file.
	Cols int
	// Labels fixes the classes: label Labels[k] becomes class k, and any
	// label not in the list is an error. nil means infer (see above).
	Labels []int64
	// MaxFeatures bounds the feature count inferred when Cols is 0: a
	// larger index is an error. 0 means DefaultMaxFeatures of the input's
	// size. (The feature count sizes the model: one 21-byte line with index
	// 2^30 would otherwise ask for gigabytes of weights.)
	MaxFeatures int
}

// DefaultMaxFeatures is the largest feature index accepted from an input of
// textBytes bytes (decompressed) unless the caller says otherwise:
// max(2^20, 64 × textBytes). Real LIBSVM data has far fewer features than
// bytes (news20: 1.3 M features in 130 MB; kdd2010: 20 M in 2.5 GB), so
// only a file written to provoke it, or a typo, meets the limit.
func DefaultMaxFeatures(textBytes int64) int {
	if textBytes > math.MaxInt32/64 {
		return math.MaxInt32
	}
	return max(1<<20, 64*int(textBytes))
}

// LIBSVMError reports a malformed LIBSVM line. It matches ErrFormat.
type LIBSVMError struct {
	Line   int    // 1-based line number
	Token  string // the offending field, "" when the whole line is at fault
	Reason string
}

// Error formats the error as "line N: field \"tok\": reason".
func (e *LIBSVMError) Error() string {
	if e.Token == "" {
		return fmt.Sprintf("line %d: %s", e.Line, e.Reason)
	}
	return fmt.Sprintf("line %d: field %q: %s", e.Line, e.Token, e.Reason)
}

// Unwrap makes a LIBSVMError match ErrFormat.
func (e *LIBSVMError) Unwrap() error { return ErrFormat }

// ParseLIBSVM reads LIBSVM text from r into a Sparse (format, label mapping
// and options described above). The first malformed line stops parsing with
// a *LIBSVMError carrying its line number and token.
func ParseLIBSVM(r io.Reader, opts LIBSVMOptions) (*Sparse, error) {
	if opts.Cols < 0 || opts.Cols > math.MaxInt32 {
		return nil, errorf(ErrConfig, "libsvm: Cols = %d, want 0 (infer) or 1..%d", opts.Cols, math.MaxInt32)
	}
	if opts.MaxFeatures < 0 {
		return nil, errorf(ErrConfig, "libsvm: MaxFeatures = %d, want 0 (default) or more", opts.MaxFeatures)
	}
	p := &libsvmParser{opts: opts, s: &Sparse{Indptr: []int64{0}}}
	if opts.Labels != nil {
		p.fixed = make(map[int64]int32, len(opts.Labels))
		for k, l := range opts.Labels {
			if _, dup := p.fixed[l]; dup {
				return nil, errorf(ErrConfig, "libsvm: label %d appears twice in Labels", l)
			}
			p.fixed[l] = int32(k)
		}
	}
	src, _, err := maybeGunzip(r)
	if err != nil {
		return nil, fmt.Errorf("libsvm: %w", err)
	}
	// bufio.Scanner hands out the partial last line of a failed read as if
	// the input had ended there; remember the failure to report it instead.
	rec := &errRecorder{r: src}
	sc := bufio.NewScanner(rec)
	sc.Buffer(make([]byte, 0, 64<<10), maxLIBSVMLine)
	line := 0
	for sc.Scan() {
		if rec.err != nil {
			break
		}
		line++
		if err := p.parseLine(line, sc.Text()); err != nil {
			return nil, err
		}
	}
	if err := cmp.Or(rec.err, sc.Err()); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &LIBSVMError{Line: line + 1, Reason: fmt.Sprintf("line longer than %d bytes", maxLIBSVMLine)}
		}
		return nil, readErr(err, "libsvm: reading after line %d", line)
	}
	return p.finish(rec.n)
}

// libsvmParser is ParseLIBSVM's state: the rows so far, their labels
// (mapped through fixed, or raw to be mapped at the end), and the largest
// feature index with where it was.
type libsvmParser struct {
	opts     LIBSVMOptions
	fixed    map[int64]int32 // opts.Labels' classes; nil: inferred
	s        *Sparse
	raw      []int64 // source labels, when the mapping is inferred
	maxIndex int
	maxLine  int
	maxTok   string
}

// parseLine adds line number line's row (a blank or comment-only line
// adds none).
func (p *libsvmParser) parseLine(line int, text string) error {
	s := p.s
	if i := strings.IndexByte(text, '#'); i >= 0 {
		text = text[:i]
	}
	tok, rest := nextField(text)
	if tok == "" {
		return nil
	}
	label, reason := parseLabel(tok)
	if reason != "" {
		return &LIBSVMError{Line: line, Token: tok, Reason: reason}
	}
	if p.fixed != nil {
		c, ok := p.fixed[label]
		if !ok {
			return &LIBSVMError{Line: line, Token: tok, Reason: fmt.Sprintf("label %d is not one of the given labels %v", label, p.opts.Labels)}
		}
		s.Y = append(s.Y, c)
	} else {
		p.raw = append(p.raw, label)
	}
	prev := 0
	for {
		tok, rest = nextField(rest)
		if tok == "" {
			break
		}
		idx, val, reason := parseFeature(tok, prev, p.opts.Cols)
		if reason != "" {
			return &LIBSVMError{Line: line, Token: tok, Reason: reason}
		}
		prev = idx
		if idx > p.maxIndex {
			p.maxIndex, p.maxLine = idx, line
			if p.opts.Cols == 0 {
				p.maxTok = strings.Clone(tok)
			}
		}
		s.Indices = append(s.Indices, int32(idx-1))
		s.Values = append(s.Values, val)
	}
	s.Indptr = append(s.Indptr, int64(len(s.Indices)))
	return nil
}

// finish checks the inferred width against the limit for n bytes of
// input and sets the matrix's shape and classes.
func (p *libsvmParser) finish(n int64) (*Sparse, error) {
	s, opts := p.s, p.opts
	if limit := cmp.Or(opts.MaxFeatures, DefaultMaxFeatures(n)); opts.Cols == 0 && p.maxIndex > limit {
		why := fmt.Sprintf("the default limit for %d bytes of input, max(2^20, 64 × bytes), a guard against hostile files", n)
		if opts.MaxFeatures > 0 {
			why = "the limit given"
		}
		return nil, errorf(ErrTooLarge, "line %d: field %q: feature index %d exceeds %d, %s: if the data really has %d features, raise the limit (Config.Data.MaxFeatures %d)",
			p.maxLine, p.maxTok, p.maxIndex, limit, why, p.maxIndex, p.maxIndex)
	}
	s.Rows = len(s.Indptr) - 1
	s.Cols = p.maxIndex
	if opts.Cols > 0 {
		s.Cols = opts.Cols
	}
	if p.fixed != nil {
		s.Classes, s.LabelValues = len(opts.Labels), slices.Clone(opts.Labels)
	} else {
		s.Y, s.LabelValues = mapLabels(p.raw)
		s.Classes = len(s.LabelValues)
	}
	return s, nil
}

// LoadLIBSVM reads a LIBSVM file (raw or gzip) with ParseLIBSVM; errors name
// the file.
func LoadLIBSVM(path string, opts LIBSVMOptions) (*Sparse, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := ParseLIBSVM(f, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// errRecorder passes reads through, counts the bytes and keeps the first
// error other than io.EOF.
type errRecorder struct {
	r   io.Reader
	err error
	n   int64 // bytes read
}

func (e *errRecorder) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.n += int64(n)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// nextField splits the first space- or tab-separated field off s.
func nextField(s string) (field, rest string) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	j := i
	for j < len(s) && !isSpace(s[j]) {
		j++
	}
	return s[i:j], s[j:]
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' }

// parseLabel reads an integer label, written as an integer or as a float
// with no fractional part; reason is "" on success.
func parseLabel(tok string) (label int64, reason string) {
	if v, err := strconv.ParseInt(tok, 10, 64); err == nil {
		return v, ""
	}
	f, err := strconv.ParseFloat(tok, 64)
	switch {
	case err != nil && strings.IndexByte(tok, ':') >= 0:
		return 0, "line starts with a feature, want a label first"
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, "label is not a number"
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, "label is not finite"
	case math.Abs(f) > 1<<53:
		return 0, "label is out of range"
	case f != math.Trunc(f):
		return 0, "label is not an integer"
	}
	return int64(f), ""
}

// parseFeature reads "index:value" given the previous index on the line
// (0 before the first) and the fixed column count (0 if none).
func parseFeature(tok string, prev, cols int) (index int, value float32, reason string) {
	colon := strings.IndexByte(tok, ':')
	if colon < 0 {
		return 0, 0, "missing ':' between index and value"
	}
	is, vs := tok[:colon], tok[colon+1:]
	index, ok := parseIndex(is)
	switch {
	case !ok:
		return 0, 0, fmt.Sprintf("index %q is not a positive integer ≤ %d", is, math.MaxInt32)
	case index == prev:
		return 0, 0, fmt.Sprintf("index %d repeated", index)
	case index < prev:
		return 0, 0, fmt.Sprintf("index %d after %d: indices must be ascending", index, prev)
	case cols > 0 && index > cols:
		return 0, 0, fmt.Sprintf("index %d exceeds the feature count %d", index, cols)
	}
	v, err := strconv.ParseFloat(vs, 32)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, 0, fmt.Sprintf("value %q overflows float32", vs)
	case err != nil:
		return 0, 0, fmt.Sprintf("value %q is not a number", vs)
	case math.IsNaN(v) || math.IsInf(v, 0):
		return 0, 0, fmt.Sprintf("value %q is not finite", vs)
	}
	return index, float32(v), ""
}

// parseIndex parses decimal digits into an int in [1, MaxInt32].
func parseIndex(s string) (int, bool) {
	if s == "" || len(s) > 10 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n >= 1 && n <= math.MaxInt32
}

// mapLabels turns source labels into classes by the rules in the format
// comment above, returning the classes and the label of each class.
func mapLabels(raw []int64) (y []int32, values []int64) {
	if len(raw) == 0 {
		return nil, nil
	}
	distinct := slices.Clone(raw)
	slices.Sort(distinct)
	distinct = slices.Compact(distinct)
	switch {
	case isSubset(distinct, 0, 1):
		values = []int64{0, 1}
	case isSubset(distinct, -1, 1):
		values = []int64{-1, 1}
	default:
		values = distinct
	}
	y = make([]int32, len(raw))
	for i, l := range raw {
		k, _ := slices.BinarySearch(values, l)
		y[i] = int32(k)
	}
	return y, values
}

// isSubset reports whether every element of sorted is a or b.
func isSubset(sorted []int64, a, b int64) bool {
	for _, v := range sorted {
		if v != a && v != b {
			return false
		}
	}
	return true
}
