package main

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/dml-project/dml/trainer"
)

// TestFlagNamesMatch: every trainer.ConfigError field the CLI maps names a
// real Config field and a flag that `dml train` registers.
func TestFlagNamesMatch(t *testing.T) {
	cfg := trainer.DefaultConfig()
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	registerTrainFlags(fs, &cfg)
	for field, name := range flagNames {
		typ := reflect.TypeFor[trainer.Config]()
		for _, part := range strings.Split(field, ".") {
			f, ok := typ.FieldByName(part)
			if !ok {
				t.Errorf("%s: no such Config field", field)
				break
			}
			typ = f.Type
		}
		if fs.Lookup(strings.TrimPrefix(name, "--")) == nil {
			t.Errorf("%s maps to %s, which dml train does not have", field, name)
		}
	}
	// A bad setting found inside the world reads as its flag.
	cfg.Sync, cfg.PS.Servers = trainer.SyncPS, 4
	if got := flagError(cfg.ValidateWorld(2)); !strings.HasPrefix(got, "--servers 4 needs at least 5 ranks") {
		t.Errorf("got %q", got)
	}
}
