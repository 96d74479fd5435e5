package main

import (
	"flag"
	"io"
	"reflect"
	"sync"

	"github.com/dml-project/dml/trainer"
)

// flagNames maps each Config setting a message names (trainer.ConfigError's
// Field: "Opt.LR", "Data.SeqLen") to the flag that sets it ("--lr"). It is
// read off the flag set itself, the one table of dml train's flags: each
// flag's Value holds the address of the Config field it writes, so a flag
// registered once names its setting in every message, and no second list
// can drift from the first (issue 32). It is made on first use (an
// error's wording), not at every start.
var flagNames = sync.OnceValue(configFlagNames)

// indirectFlags are the settings no flag writes by address: a model
// file's layers (--model-file reads them from a file), and the class
// count idx and libsvm data must have (set from --classes after parsing:
// expectClasses).
var indirectFlags = map[string]string{"Net": "--model-file", "Data.ExpectClasses": "--classes"}

// configFlagNames registers dml train's flags on a scratch Config and
// matches each flag's target addresses to the Config's fields.
func configFlagNames() map[string]string {
	cfg := trainer.DefaultConfig()
	fs := flag.NewFlagSet("names", flag.ContinueOnError)
	var cf commonFlags
	registerAllTrainFlags(fs, &cfg, &cf, io.Discard)
	fields := map[target][]string{}
	settingPaths(reflect.ValueOf(&cfg).Elem(), "", fields)
	names := map[string]string{}
	for k, v := range indirectFlags {
		names[k] = v
	}
	fs.VisitAll(func(f *flag.Flag) {
		for _, t := range flagTargets(reflect.ValueOf(f.Value), 0) {
			for _, path := range fields[t] {
				if _, dup := names[path]; !dup {
					names[path] = "--" + f.Name
				}
			}
		}
	})
	return names
}

// target is where a flag writes: an address, and the kind of value there
// (a struct and its first field share an address; the flag package's
// intValue is an int).
type target struct {
	addr uintptr
	kind reflect.Kind
}

// settingPaths records every field of v (a struct) under prefix: its own
// path, and for a struct field its fields' too, so that a flag setting a
// whole struct (--straggle) names each of its fields.
func settingPaths(v reflect.Value, prefix string, fields map[target][]string) []string {
	var all []string
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		path := prefix + sf.Name
		paths := []string{path}
		if f.Kind() == reflect.Struct {
			paths = append(paths, settingPaths(f, path+".", fields)...)
		}
		t := target{f.Addr().Pointer(), f.Kind()}
		fields[t] = append(fields[t], paths...)
		all = append(all, paths...)
	}
	return all
}

// flagTargets finds the addresses a flag.Value writes: the pointer it is
// (the flag package's own values, an enum's *T), and the pointers its
// fields hold (dml's flag types: float32Flag{&cfg.Opt.LR}, rangeFlag's
// two, the flag package's textValue).
func flagTargets(v reflect.Value, depth int) []target {
	if depth > 3 || !v.IsValid() {
		return nil
	}
	switch v.Kind() {
	case reflect.Interface:
		return flagTargets(v.Elem(), depth+1)
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		e := v.Elem()
		ts := []target{{v.Pointer(), e.Kind()}}
		if e.Kind() == reflect.Struct { // a flag type held by pointer (*overlapFlag), or a struct setting
			ts = append(ts, flagTargets(e, depth+1)...)
		}
		return ts
	case reflect.Struct:
		var ts []target
		for i := range v.NumField() {
			if k := v.Field(i).Kind(); k == reflect.Pointer || k == reflect.Interface {
				ts = append(ts, flagTargets(v.Field(i), depth+1)...)
			}
		}
		return ts
	}
	return nil
}
