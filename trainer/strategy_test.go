package trainer

import (
	"slices"
	"strings"
	"testing"
)

// TestRegistry: every Sync has its unit, named as --sync parses it, with a
// help line in --sync's help, and the benches' names are unique and parse
// back to the strategy that owns them.
func TestRegistry(t *testing.T) {
	for i, u := range syncUnits {
		s := Sync(i)
		if u == nil {
			t.Fatalf("Sync(%d) has no unit", i)
		}
		if got, err := ParseSync(u.name()); err != nil || got != s {
			t.Errorf("ParseSync(%q) = %v, %v; want %v", u.name(), got, err, s)
		}
		if s.String() != u.name() || s.unit() != u {
			t.Errorf("Sync(%d): String %q, unit %T; want %q", i, s.String(), s.unit(), u.name())
		}
		if !strings.Contains(SyncHelp(), u.name()+" ("+u.help()+")") {
			t.Errorf("--sync's help leaves out %s", u.name())
		}
		if len(u.variants()) == 0 {
			t.Errorf("%s has no bench name", u.name())
		}
		for _, v := range u.variants() {
			if v.Sync != s {
				t.Errorf("%s's variant %q trains with %v", u.name(), v.Name, v.Sync)
			}
		}
	}
	if Sync(len(syncUnits)).unit() != nil {
		t.Error("a Sync past the registry has a unit")
	}
	var names []string
	for _, v := range Variants() {
		if slices.Contains(names, v.Name) {
			t.Errorf("two variants are named %q", v.Name)
		}
		names = append(names, v.Name)
		got, err := ParseVariant(v.Name)
		if err != nil || got != v {
			t.Errorf("ParseVariant(%q) = %+v, %v; want %+v", v.Name, got, err, v)
		}
		c := DefaultConfig()
		v.Apply(&c)
		if c.Sync != v.Sync || v.Servers && c.PS.Consistency != v.Consistency {
			t.Errorf("%q applied: sync %v, consistency %v", v.Name, c.Sync, c.PS.Consistency)
		}
	}
	if _, err := ParseVariant("lazy"); err == nil || !strings.Contains(err.Error(), strings.Join(names, ", ")) {
		t.Errorf("ParseVariant(lazy): %v; want the known names", err)
	}
}

// TestUnitsAnswerAsBefore pins what the units say about the four
// strategies (the branches on cfg.Sync they replaced).
func TestUnitsAnswerAsBefore(t *testing.T) {
	c := DefaultConfig()
	c.PS.Servers = 2
	for _, tc := range []struct {
		s                            Sync
		servers                      int
		decentral, stops, trainState bool
	}{
		{SyncAllreduce, 0, false, true, true},
		{SyncPS, 2, false, true, false},
		{SyncDPSGD, 0, true, true, false},
		{SyncADPSGD, 0, true, false, false},
	} {
		u := tc.s.unit()
		c.Sync = tc.s
		if u.servers(c) != tc.servers || tc.s.Decentralized() != tc.decentral || c.StopsAtBoundaries() != tc.stops || u.takesTrainState() != tc.trainState {
			t.Errorf("%v: servers %d, decentralized %v, stops at boundaries %v, takes a TrainState %v; want %+v",
				tc.s, u.servers(c), tc.s.Decentralized(), c.StopsAtBoundaries(), u.takesTrainState(), tc)
		}
	}
}
