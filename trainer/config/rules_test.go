package config

import (
	"errors"
	"strings"
	"testing"
)

// fakeRules records what Validate asked it, and refuses what it is told to.
type fakeRules struct {
	name          string
	validate      error
	foreign       error
	asked         *[]string
	decentralized bool
}

func (f fakeRules) Validate(Config) error {
	*f.asked = append(*f.asked, f.name+".Validate")
	return f.validate
}

func (f fakeRules) Foreign(Config) error {
	*f.asked = append(*f.asked, f.name+".Foreign")
	return f.foreign
}

func (f fakeRules) ValidateWorld(Config, int) error { return nil }
func (f fakeRules) Decentralized() bool             { return f.decentralized }
func (f fakeRules) StopsAtBoundaries() bool         { return !f.decentralized }

// withRules runs fn with the registry holding only rs (this package's tests
// see no strategy of package trainer's, which registers its own).
func withRules(t *testing.T, rs map[Sync]Rules, fn func()) {
	t.Helper()
	saved := rules
	defer func() { rules = saved }()
	rules = [len(rules)]Rules{}
	for s, r := range rs {
		Register(s, r)
	}
	fn()
}

// TestValidateAsksTheRegisteredRules: Validate asks the chosen strategy's
// Validate and every other registered strategy's Foreign, refuses a Sync
// with no rules (naming the field), and the Sync's own answers
// (Decentralized, StopsAtBoundaries) are its rules'.
func TestValidateAsksTheRegisteredRules(t *testing.T) {
	var asked []string
	own := errors.New("the chosen strategy refuses")
	theirs := errors.New("another strategy's setting")
	a := fakeRules{name: "a", asked: &asked}
	b := fakeRules{name: "b", asked: &asked, decentralized: true}
	withRules(t, map[Sync]Rules{SyncAllreduce: a, SyncDPSGD: b}, func() {
		c := DefaultConfig()
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(asked, " "); got != "b.Foreign a.Validate" {
			t.Errorf("Validate asked %q; want b.Foreign a.Validate", got)
		}
		if SyncAllreduce.Decentralized() || !SyncDPSGD.Decentralized() || SyncPS.Decentralized() {
			t.Error("Decentralized is not the registered rules'")
		}
		if !c.StopsAtBoundaries() {
			t.Error("StopsAtBoundaries is not the registered rules'")
		}
		c.Sync = SyncPS // no rules registered
		var ce *ConfigError
		if err := c.Validate(); !errors.As(err, &ce) || ce.Field != "Sync" || !errors.Is(err, ErrUsage) {
			t.Errorf("a Sync without rules: %v; want a ConfigError on Sync", err)
		}
		if c.StopsAtBoundaries() {
			t.Error("a Sync without rules stops at boundaries")
		}
	})
	a.validate = own
	withRules(t, map[Sync]Rules{SyncAllreduce: a}, func() {
		if err := DefaultConfig().Validate(); !errors.Is(err, own) {
			t.Errorf("Validate = %v; want the strategy's own refusal", err)
		}
	})
	a.validate, b.foreign = nil, theirs
	withRules(t, map[Sync]Rules{SyncAllreduce: a, SyncDPSGD: b}, func() {
		if err := DefaultConfig().Validate(); !errors.Is(err, theirs) {
			t.Errorf("Validate = %v; want the other strategy's Foreign", err)
		}
	})
}

// TestRegisterOnce: the registry is filled once; a second registration of
// a Sync, or one past the names, panics.
func TestRegisterOnce(t *testing.T) {
	var asked []string
	for name, s := range map[string]Sync{"twice": SyncPS, "unnamed": Sync(len(syncNames))} {
		withRules(t, map[Sync]Rules{SyncPS: fakeRules{asked: &asked}}, func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Register did not panic", name)
				}
			}()
			Register(s, fakeRules{asked: &asked})
		})
	}
}
