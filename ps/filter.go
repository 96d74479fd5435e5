package ps

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Update is one outgoing push as filters see it, before the worker splits it
// by owner and encodes it.
type Update struct {
	// Dense says Values covers the whole model: Values[i] belongs to key i,
	// and Keys is unused.
	Dense bool
	// Keys are the strictly increasing keys of Values when !Dense.
	Keys []int64
	// Values are the gradient entries.
	Values []float32
	// Encoding is how the values travel (Float32 unless a filter says so).
	Encoding Encoding
}

// Filter rewrites an outgoing push. A Filter belongs to one worker and is
// called from that worker's goroutine only, once per push, in Config.Filters
// order. It may change u.Values in place (the worker passes its own copy of
// the caller's gradient) and may replace u.Keys and u.Values with slices it
// owns, which must stay untouched until its next call; it must not write
// into u.Keys, which may be the caller's.
type Filter interface {
	Filter(u *Update) error
}

// FilterSpec describes a filter. NewWorker calls NewFilter once per worker,
// so that per-worker state (residues) is never shared between workers.
type FilterSpec interface {
	// NewFilter returns a fresh Filter for a model of p keys.
	NewFilter(p int) Filter
	// String names the filter as ParseFilters accepts it.
	String() string
}

// SignificantlyModified is the "significantly modified" filter of Li et al.
// (OSDI'14): it sends only the entries whose accumulated change exceeds
// Threshold in absolute value. Every entry it does not send is kept as a
// residue and added to the same key's next pushed value, so no gradient is
// lost, only delayed: for every key, the sum of the values sent plus the
// residue equals the sum of the values pushed. Its output is always sparse.
type SignificantlyModified struct {
	Threshold float32
}

// NewFilter implements FilterSpec.
func (s SignificantlyModified) NewFilter(p int) Filter {
	return &sigModFilter{thr: s.Threshold, residue: make([]float32, p)}
}

// String implements FilterSpec.
func (s SignificantlyModified) String() string {
	return "sigmod:" + strconv.FormatFloat(float64(s.Threshold), 'g', -1, 32)
}

type sigModFilter struct {
	thr     float32
	residue []float32 // per key: change not sent yet
	keys    []int64
	vals    []float32
}

func (f *sigModFilter) Filter(u *Update) error {
	f.keys, f.vals = f.keys[:0], f.vals[:0]
	for i, v := range u.Values {
		k := int64(i)
		if !u.Dense {
			k = u.Keys[i]
		}
		acc := f.residue[k] + v
		if acc > f.thr || acc < -f.thr {
			f.keys = append(f.keys, k)
			f.vals = append(f.vals, acc)
			f.residue[k] = 0
		} else {
			f.residue[k] = acc
		}
	}
	u.Dense, u.Keys, u.Values = false, f.keys, f.vals
	return nil
}

// Residue returns the filter's unsent residue for each key when f is a
// significantly-modified filter, else nil. The slice is the filter's own.
func Residue(f Filter) []float32 {
	if s, ok := f.(*sigModFilter); ok {
		return s.residue
	}
	return nil
}

// Compress sends values as Float16 or BFloat16 (round to nearest even)
// instead of float32, halving the value bytes. A value that would overflow
// to infinity is an error (naming the key), not a silent Inf.
type Compress struct {
	Format Encoding
}

// NewFilter implements FilterSpec.
func (c Compress) NewFilter(int) Filter { return compressFilter(c) }

// String implements FilterSpec.
func (c Compress) String() string { return c.Format.String() }

type compressFilter Compress

func (c compressFilter) Filter(u *Update) error {
	// limit is the smallest magnitude that rounds to infinity.
	var limit float32
	switch c.Format {
	case Float16:
		limit = 65520 // Float16Max + half an ulp (ties to even go up)
	case BFloat16:
		limit = math.Float32frombits(0x7f7f8000) // bfloat16 max + half an ulp
	default:
		return fmt.Errorf("ps: compress filter: unsupported format %v: %w", c.Format, ErrConfig)
	}
	for i, v := range u.Values {
		if (v >= limit || v <= -limit) && !math.IsInf(float64(v), 0) {
			k := int64(i)
			if !u.Dense {
				k = u.Keys[i]
			}
			return fmt.Errorf("ps: %v filter: value %g at key %d overflows: %w", c.Format, v, k, ErrArgument)
		}
	}
	u.Encoding = c.Format
	return nil
}

// ParseFilters parses a comma-separated filter list, as a CLI flag gives it:
// "sigmod:THRESHOLD", "fp16", "bf16"; "" or "none" is no filter. Example:
// "sigmod:0.001,fp16".
func ParseFilters(s string) ([]FilterSpec, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "none") {
		return nil, nil
	}
	var out []FilterSpec
	for _, f := range strings.Split(s, ",") {
		name, arg, hasArg := strings.Cut(strings.TrimSpace(f), ":")
		switch strings.ToLower(name) {
		case "sigmod":
			if !hasArg {
				return nil, fmt.Errorf("ps: filter %q: want sigmod:THRESHOLD: %w", f, ErrConfig)
			}
			t, err := strconv.ParseFloat(arg, 32)
			if err != nil || t < 0 || math.IsNaN(t) {
				return nil, fmt.Errorf("ps: filter %q: threshold must be a number >= 0: %w", f, ErrConfig)
			}
			out = append(out, SignificantlyModified{Threshold: float32(t)})
		case "fp16", "float16":
			out = append(out, Compress{Format: Float16})
		case "bf16", "bfloat16":
			out = append(out, Compress{Format: BFloat16})
		default:
			return nil, fmt.Errorf("ps: unknown filter %q (want sigmod:T, fp16 or bf16): %w", f, ErrConfig)
		}
		if hasArg && !strings.EqualFold(name, "sigmod") {
			return nil, fmt.Errorf("ps: filter %q takes no argument: %w", f, ErrConfig)
		}
	}
	return out, nil
}
