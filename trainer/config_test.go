package trainer

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/ps"
)

// BadConfigs is a table of settings Validate or ValidateWorld (for a job of
// 3 ranks) must refuse, with the Config field each error must name.
var badConfigs = []struct {
	field string
	edit  func(*Config)
}{
	{"Model", func(c *Config) { c.Model = 99 }},
	{"Model", func(c *Config) { c.Model = SparseLogreg }},
	{"Hidden", func(c *Config) { c.Hidden = nil }},
	{"Hidden", func(c *Config) { c.Hidden = []int{4, 0} }},
	{"Batch", func(c *Config) { c.Batch = 0 }},
	{"Epochs", func(c *Config) { c.Epochs = -1 }},
	{"EvalEvery", func(c *Config) { c.EvalEvery = -1 }},
	{"Sync", func(c *Config) { c.Sync = 7 }},
	{"Straggle", func(c *Config) { c.Straggle = Straggle{Rank: 1, Factor: 0.5} }},
	{"Straggle", func(c *Config) { c.Straggle = Straggle{Rank: 3, Factor: 2} }},
	{"Allreduce", func(c *Config) { c.Allreduce = "star" }},
	{"Opt.Kind", func(c *Config) { c.Opt.Kind = 9 }},
	{"Opt.LR", func(c *Config) { c.Opt.LR = 0 }},
	{"Opt.Momentum", func(c *Config) { c.Opt.Momentum = 1 }},
	{"Opt.WeightDecay", func(c *Config) { c.Opt.WeightDecay = -1 }},
	{"Data.Name", func(c *Config) { c.Data.Name = "imagenet" }},
	{"Data.Samples", func(c *Config) { c.Data.Name, c.Data.Samples = "synthetic", 0 }},
	{"Data.Train", func(c *Config) { c.Data.Name = "libsvm" }},
	{"PS.Servers", func(c *Config) { c.Sync, c.PS.Servers = SyncPS, 0 }},
	{"PS.Servers", func(c *Config) { c.Sync, c.PS.Servers = SyncPS, 3 }},
	{"PS.Consistency", func(c *Config) { c.Sync, c.PS.Consistency = SyncPS, ps.DSSP+1 }},
	{"PS.Staleness", func(c *Config) { c.Sync, c.PS.Staleness = SyncPS, -1 }},
	{"PS.StalenessLow", func(c *Config) { c.Sync, c.PS.StalenessLow = SyncPS, -1 }},
	{"PS.StalenessHigh", func(c *Config) { c.Sync, c.PS.StalenessLow, c.PS.StalenessHigh = SyncPS, 3, 2 }},
	{"PS.Filters", func(c *Config) { c.Sync, c.PS.Filters = SyncPS, "zip" }},
	// Issue 10: no float setting may be NaN or ±Inf (--lr Inf panicked in
	// Hash); each is refused naming its field, whichever rule reads it.
	{"Opt.LR", func(c *Config) { c.Opt.LR = float32(math.Inf(1)) }},
	{"Opt.Momentum", func(c *Config) { c.Opt.Momentum = float32(math.NaN()) }},
	{"Opt.WeightDecay", func(c *Config) { c.Opt.WeightDecay = float32(math.Inf(1)) }},
	{"Opt.WeightDecay", func(c *Config) { c.Opt.WeightDecay = float32(math.NaN()) }},
	{"Opt.Eps", func(c *Config) { c.Opt.Kind, c.Opt.Eps = optim.SGD, float32(math.Inf(-1)) }},
	{"Straggle.Factor", func(c *Config) { c.Straggle = Straggle{Rank: 1, Factor: math.Inf(1)} }},
	{"Straggle.Factor", func(c *Config) { c.Straggle = Straggle{Rank: -1, Factor: math.NaN()} }},
	{"Straggle", func(c *Config) { c.Straggle = Straggle{Rank: 1, Factor: 2e9} }},
	{"Data.Noise", func(c *Config) { c.Data.Name, c.Data.Noise = "synthetic", math.Inf(1) }},
	{"Data.Noise", func(c *Config) { c.Data.Noise = math.NaN() }}, // even where unread
	{"PS.Filters", func(c *Config) { c.Sync, c.PS.Filters = SyncPS, "sigmod:Inf" }},
	{"PS.Filters", func(c *Config) { c.Sync, c.PS.Filters = SyncPS, "sigmod:NaN" }},
	// dssp sized a table by sU−sL: 0,MaxInt panicked in makeslice.
	{"PS.StalenessHigh", func(c *Config) { c.Sync, c.PS.StalenessLow, c.PS.StalenessHigh = SyncPS, 0, math.MaxInt }},
	{"PS.Staleness", func(c *Config) { c.Sync, c.PS.Staleness = SyncPS, math.MaxInt }},
}

// TestConfigErrorsNameTheirField: each bad setting is refused with a
// *ConfigError naming a real Config field, wrapping ErrConfig and ErrUsage.
func TestConfigErrorsNameTheirField(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("the default configuration: %v", err)
	}
	for i, tc := range badConfigs {
		cfg := DefaultConfig()
		tc.edit(&cfg)
		err := cfg.Validate()
		if err == nil {
			err = cfg.ValidateWorld(3)
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrConfig) || !errors.Is(err, ErrUsage) {
			t.Errorf("case %d: got %v (%T), want a ConfigError for %s", i, err, err, tc.field)
			continue
		}
		if !strings.HasPrefix(err.Error(), tc.field+" ") {
			t.Errorf("case %d: %q does not start with the field", i, err)
		}
		if !fieldExists(reflect.TypeFor[Config](), tc.field) {
			t.Errorf("case %d: %s is not a Config field", i, tc.field)
		}
	}
}

func fieldExists(t reflect.Type, path string) bool {
	for _, name := range strings.Split(path, ".") {
		f, ok := t.FieldByName(name)
		if !ok {
			return false
		}
		t = f.Type
	}
	return true
}

// TestOneWorldCheck: servers must be fewer than ranks, said once, by
// ValidateWorld; a job of exactly servers+1 ranks is fine.
func TestOneWorldCheck(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Sync, cfg.PS.Servers = SyncPS, 2
	if err := cfg.ValidateWorld(3); err != nil {
		t.Fatal(err)
	}
	if err := cfg.ValidateWorld(2); err == nil || !strings.Contains(err.Error(), "needs at least 3 ranks") {
		t.Fatalf("2 servers, 2 ranks: %v", err)
	}
}

// TestHashNeverPanics: Hash is robust even for a Config Validate would
// refuse (NaN and ±Inf, which JSON cannot encode: --lr Inf panicked in it),
// tells such configurations apart, and ignores the per-process settings.
func TestHashNeverPanics(t *testing.T) {
	seen := map[uint64]string{DefaultConfig().Hash(): "default"}
	for name, edit := range map[string]func(*Config){
		"lr +Inf":      func(c *Config) { c.Opt.LR = float32(math.Inf(1)) },
		"lr -Inf":      func(c *Config) { c.Opt.LR = float32(math.Inf(-1)) },
		"momentum NaN": func(c *Config) { c.Opt.Momentum = float32(math.NaN()) },
		"noise +Inf":   func(c *Config) { c.Data.Noise = math.Inf(1) },
		"straggle NaN": func(c *Config) { c.Straggle.Factor = math.NaN() },
	} {
		cfg := DefaultConfig()
		edit(&cfg)
		h := cfg.Hash() // must not panic
		if other, dup := seen[h]; dup {
			t.Errorf("%s hashes like %s", name, other)
		}
		seen[h] = name
		cfg.Save, cfg.Metrics, cfg.Overlap, cfg.Timeout = "w.npz", "m.jsonl", !cfg.Overlap, time.Second
		if cfg.Hash() != h {
			t.Errorf("%s: the per-process settings change the hash", name)
		}
	}
}
