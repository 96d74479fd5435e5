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
	// A configuration mismatch between ranks names the flag of every
	// setting the ranks compare.
	for _, field := range trainer.ComparedFields() {
		if _, ok := flagNames[field]; !ok {
			t.Errorf("ranks compare Config field %s, but no flag is mapped to it (flagNames)", field)
		}
	}
	// A bad setting found inside the world reads as its flag.
	cfg.Sync, cfg.PS.Servers = trainer.SyncPS, 4
	if got := flagError(cfg.ValidateWorld(2)); !strings.HasPrefix(got, "--servers 4 needs at least 5 ranks") {
		t.Errorf("got %q", got)
	}
}

// TestSpareCoreForComm: --overlap auto turns the communication goroutine on
// only where a rank has a core for it beside its BLAS threads.
func TestSpareCoreForComm(t *testing.T) {
	for _, c := range []struct {
		cpus, online, local, threads int
		want                         bool
	}{
		{1, 2, 2, 1, false},   // mpirun --bind-to core, 2 ranks on 2 cores
		{2, 2, 2, 1, false},   // unbound, 2 ranks sharing 2 cores
		{2, 2, 4, 1, false},   // 4 ranks on 2 cores, unbound
		{1, 2, 4, 1, false},   // 4 ranks on 2 cores, bound
		{16, 16, 2, 1, true},  // 2 ranks on a 16-core node
		{8, 16, 2, 1, true},   // the same, bound to a socket each
		{16, 16, 8, 1, true},  // 8 ranks × (1 + 1) = 16
		{16, 16, 8, 2, false}, // 8 ranks × (2 + 1) > 16
		{2, 2, 1, 1, true},    // one rank alone on 2 cores
	} {
		if got := spareCoreForComm(c.cpus, c.online, c.local, c.threads); got != c.want {
			t.Errorf("%d of %d cpus, %d local ranks, %d threads: %v, want %v", c.cpus, c.online, c.local, c.threads, got, c.want)
		}
	}
}

// TestJoinSpaced: a boolean flag takes its value after a space as well as
// after "=" ("--shuffle false" was refused as an unexpected argument),
// --overlap also "auto"; other words after a boolean flag are left alone,
// and nothing after "--" is rewritten.
func TestJoinSpaced(t *testing.T) {
	cfg := trainer.DefaultConfig()
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	registerTrainFlags(fs, &cfg)
	for _, tc := range []struct{ in, want string }{
		{"--shuffle false", "--shuffle=false"},
		{"-shuffle true --epochs 3", "-shuffle=true --epochs 3"},
		{"--shuffle=false", "--shuffle=false"},
		{"--overlap auto --overlap false", "--overlap=auto --overlap=false"},
		{"--shuffle auto", "--shuffle auto"},
		{"--shuffle --epochs 3", "--shuffle --epochs 3"},
		{"--epochs false", "--epochs false"},
		{"--nosuch false", "--nosuch false"},
		{"-- --shuffle false", "-- --shuffle false"},
		{"--shuffle", "--shuffle"},
	} {
		if got := strings.Join(joinSpaced(fs, strings.Fields(tc.in)), " "); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
	if err := parse(fs, strings.Fields("--shuffle false --overlap false")); err != nil || cfg.Shuffle || cfg.Overlap {
		t.Errorf("--shuffle false --overlap false: err %v, shuffle %v, overlap %v", err, cfg.Shuffle, cfg.Overlap)
	}
}
