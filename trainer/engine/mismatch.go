package engine

import (
	"encoding"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"reflect"

	"github.com/dml-project/dml/collectives"
)

// ConfigMismatchError reports ranks started with other settings than rank
// 0's, naming the first Config field (in declaration order) in which they
// differ. It wraps ErrConfigMismatch. Every rank returns it; each knows its
// own value of the field.
type ConfigMismatchError struct {
	// Ranks are the ranks whose Config differs from rank 0's.
	Ranks []int
	// Field is the path of the first Config field that differs on
	// Ranks[0] ("Batch", "Opt.LR"); "" when no single field could be named
	// (ranks running different builds of dml).
	Field string
	// Value is this rank's value of Field, as JSON.
	Value string
}

// Error: "rank 1 started with other settings than rank 0: Batch differs
// (this rank: 32); start every rank with the same command line".
func (e *ConfigMismatchError) Error() string { return e.Describe(e.Field) }

// Describe is Error with field spelled as the caller names it (the command
// line passes the flag, "--batch", for Field).
func (e *ConfigMismatchError) Describe(field string) string {
	who := rankList(e.Ranks)
	what := ""
	if field != "" {
		what = ": " + field + " differs (this rank: " + e.Value + ")"
	}
	return fmt.Sprintf("%s started with other settings than rank 0%s; start every rank with the same command line", who, what)
}

// Unwrap returns ErrConfigMismatch.
func (e *ConfigMismatchError) Unwrap() error { return ErrConfigMismatch }

// configField is one leaf setting of a Config: its Go path and its value
// as JSON.
type configField struct {
	path, value string
}

// comparedFields lists the settings every rank must share, in declaration
// order: the leaves of the Config that Hash covers (structs are walked into
// unless they marshal themselves, as the enums do).
func comparedFields(c Config) []configField {
	c.Data.Dir, c.Data.Train, c.Data.Test = "", "", ""
	var out []configField
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		t := v.Type()
		if t.Kind() == reflect.Struct && !marshalsItself(t) {
			for i := range t.NumField() {
				f := t.Field(i)
				if !f.IsExported() || f.Tag.Get("json") == "-" {
					continue
				}
				p := f.Name
				if path != "" {
					p = path + "." + f.Name
				}
				walk(v.Field(i), p)
			}
			return
		}
		if s, ok := v.Interface().(fmt.Stringer); ok && t.Kind() != reflect.Struct {
			out = append(out, configField{path, s.String()}) // enums by name
			return
		}
		b, err := json.Marshal(v.Interface())
		if err != nil {
			b = fmt.Appendf(nil, "%#v", v.Interface())
		}
		out = append(out, configField{path, string(b)})
	}
	walk(reflect.ValueOf(c), "")
	return out
}

// ComparedFields lists the paths of the Config fields every rank must
// share ("Batch", "Opt.LR"), the ones a *ConfigMismatchError may name.
func ComparedFields() []string {
	var paths []string
	for _, f := range comparedFields(DefaultConfig()) {
		paths = append(paths, f.path)
	}
	return paths
}

func marshalsItself(t reflect.Type) bool {
	for _, t := range []reflect.Type{t, reflect.PointerTo(t)} {
		if t.Implements(reflect.TypeFor[json.Marshaler]()) || t.Implements(reflect.TypeFor[encoding.TextMarshaler]()) {
			return true
		}
	}
	return false
}

// describeMismatch runs on every rank once the configuration hashes showed
// that the ranks in differ (from rank 0): one more all-gather, of a hash
// per compared field, names the first field in which the first of them
// differs. Only the failing path pays for it.
func describeMismatch(c collectives.Comm, cfg Config, differ []int) error {
	fields := comparedFields(cfg)
	otherCounts, _, err := collectives.Agree(c, uint64(len(fields)))
	if err != nil {
		return fmt.Errorf("comparing configurations: %w", err)
	}
	e := &ConfigMismatchError{Ranks: differ}
	if len(otherCounts) > 0 { // other builds of dml: their fields cannot be matched
		return e
	}
	mine := make([]uint64, len(fields))
	for i, f := range fields {
		h := fnv.New64a()
		h.Write([]byte(f.value))
		mine[i] = h.Sum64()
	}
	all, err := collectives.AllgatherUint64(c, mine)
	if err != nil {
		return fmt.Errorf("comparing configurations: %w", err)
	}
	theirs := all[len(mine)*differ[0]:]
	for i, f := range fields {
		if theirs[i] != all[i] {
			e.Field, e.Value = f.path, f.value
			return e
		}
	}
	return e
}
