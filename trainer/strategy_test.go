package trainer

import (
	"slices"
	"strings"
	"testing"

	"github.com/dml-project/dml/trainer/config"
	"github.com/dml-project/dml/trainer/engine"
)

// TestRegistry: every Sync --sync names has its unit, whose rules are the
// configuration's (config.Register), with a help line in --sync's help,
// and the benches' names are unique and parse back to the strategy that
// owns them.
func TestRegistry(t *testing.T) {
	for i := range Syncs {
		s := Sync(i)
		u := engine.UnitOf(s)
		if u == nil {
			t.Fatalf("Sync(%d) has no unit", i)
		}
		if got, err := ParseSync(s.String()); err != nil || got != s {
			t.Errorf("ParseSync(%q) = %v, %v; want %v", s.String(), got, err, s)
		}
		if engine.UnitOf(s) != u || s.Rules() != config.Rules(u) {
			t.Errorf("Sync(%d) %v: unit %T, rules %T; want %T", i, s, engine.UnitOf(s), s.Rules(), u)
		}
		if !strings.Contains(SyncHelp(), s.String()+" ("+u.Help()+")") {
			t.Errorf("--sync's help leaves out %s", s)
		}
		if len(u.Variants()) == 0 {
			t.Errorf("%s has no bench name", s)
		}
		for _, v := range u.Variants() {
			if v.Sync != s {
				t.Errorf("%s's variant %q trains with %v", s, v.Name, v.Sync)
			}
		}
	}
	if past := Sync(len(Syncs)); engine.UnitOf(past) != nil || past.Rules() != nil {
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
		u := engine.UnitOf(tc.s)
		c.Sync = tc.s
		if u.Servers(c) != tc.servers || tc.s.Decentralized() != tc.decentral || c.StopsAtBoundaries() != tc.stops || u.TakesTrainState() != tc.trainState {
			t.Errorf("%v: servers %d, decentralized %v, stops at boundaries %v, takes a TrainState %v; want %+v",
				tc.s, u.Servers(c), tc.s.Decentralized(), c.StopsAtBoundaries(), u.TakesTrainState(), tc)
		}
	}
}
