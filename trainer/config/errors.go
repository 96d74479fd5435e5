package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/dml-project/dml/trainer/model"
)

// What a bad setting is: a usage error, and a *ConfigError naming its
// field.

// ErrUsage marks errors in how the job was started (flags that cannot work
// with this many ranks); every rank finds them alike, and the CLI exits
// with its usage code.
var ErrUsage = errors.New("usage")

// Usage marks err as a usage error (it wraps err and ErrUsage, its text
// err's): one that every rank finds alike, such as a data set too small
// for the ranks, or a data folder that is not what the flags say it is (a
// CIFAR-10 file missing, truncated, oversized, or with a bad label).
func Usage(err error) error { return usageErr{err} }

type usageErr struct{ err error }

func (e usageErr) Error() string   { return e.err.Error() }
func (e usageErr) Unwrap() []error { return []error{e.err, ErrUsage} }

// ErrConfig is wrapped by every *ConfigError (which also wraps ErrUsage:
// every rank finds a bad setting alike).
var ErrConfig = errors.New("invalid configuration")

// ConfigError reports one bad setting. Field is the path of the Config
// field that holds it ("Batch", "PS.Servers", "Opt.LR", "Data.Samples"):
// the command line maps it to the flag a person typed. Msg follows the setting's name in a
// sentence ("0 must be greater than 0").
type ConfigError struct {
	Field string
	Msg   string
}

// Error names the field: "Batch 0 must be greater than 0".
func (e *ConfigError) Error() string { return e.Field + " " + e.Msg }

// Unwrap returns ErrConfig and ErrUsage.
func (e *ConfigError) Unwrap() []error { return []error{ErrConfig, ErrUsage} }

// Bad is a *ConfigError for field.
func Bad(field, format string, args ...any) error {
	return &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// finiteFloats reports the first float32 or float64 in v (a struct, walked
// through its fields, slices and arrays) that is NaN or ±Inf, as a
// *ConfigError naming its field path ("Opt.LR"). NaN and ±Inf are never a
// meaningful setting, and JSON (the configuration hash, --metrics) cannot
// carry them.
func finiteFloats(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if x := v.Float(); math.IsNaN(x) || math.IsInf(x, 0) {
			return Bad(path, "%v must be a finite number", x)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			p := f.Name
			if path != "" {
				p = path + "." + f.Name
			}
			if err := finiteFloats(v.Field(i), p); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if l, ok := v.Index(i).Interface().(model.LayerSpec); ok {
				if err := finiteLayer(l, i); err != nil {
					return err
				}
				continue
			}
			if err := finiteFloats(v.Index(i), path); err != nil {
				return err
			}
		}
	}
	return nil
}

// finiteLayer is finiteFloats for layer i of a model file's network,
// named as the file names it (layer 2 (dropout): p NaN).
func finiteLayer(l model.LayerSpec, i int) error {
	v := reflect.ValueOf(l)
	for k := 0; k < v.NumField(); k++ {
		f := v.Type().Field(k)
		if f.Type.Kind() != reflect.Float64 && f.Type.Kind() != reflect.Float32 {
			continue
		}
		if x := v.Field(k).Float(); math.IsNaN(x) || math.IsInf(x, 0) {
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			return Bad("Net", "layer %d (%s): %s %v must be a finite number", i, l.Kind, key, x)
		}
	}
	return nil
}
