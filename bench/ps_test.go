package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/ps"
)

func TestPSConfigValidate(t *testing.T) {
	ok := DefaultPSConfig()
	sparse := ok
	sparse.Params, sparse.Keys, sparse.Of = 0, 5, 100
	for _, c := range []PSConfig{ok, sparse} {
		if err := c.Validate(3); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	for _, tc := range []struct {
		edit  func(c *PSConfig)
		ranks int
		want  string
	}{
		{func(c *PSConfig) { c.Params = 0 }, 0, "--params 0"},
		{func(c *PSConfig) { c.Params, c.Keys, c.Of = 0, 0, 10 }, 0, "--keys 0"},
		{func(c *PSConfig) { c.Params, c.Keys, c.Of = 0, 11, 10 }, 0, "beyond the model"},
		{func(c *PSConfig) { c.Params, c.Keys, c.Of = 0, 5, 0 }, 0, "--of 0"},
		{func(c *PSConfig) { c.Keys, c.Of = 5, 10 }, 0, "not both"},
		{func(c *PSConfig) { c.Servers = 3 }, 3, "at most 2 (ranks − 1)"},
		{func(c *PSConfig) { c.Servers = 1 }, 1, "at most 0"},
		{func(c *PSConfig) { c.Servers = 0 }, 0, "at least 1 server"},
		{func(c *PSConfig) { c.Params, c.Servers = 2, 3 }, 0, "every server needs a key"},
		{func(c *PSConfig) { c.Iters = 0 }, 0, "-n 0"},
		{func(c *PSConfig) { c.Warmup = -1 }, 0, "-w -1"},
		{func(c *PSConfig) { c.Models = nil }, 0, "no consistency model"},
		{func(c *PSConfig) { c.Filters = []string{"zip"} }, 0, "unknown filter"},
	} {
		c := DefaultPSConfig()
		tc.edit(&c)
		err := c.Validate(tc.ranks)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v at %d ranks: %v; want one line with %q", c, tc.ranks, err, tc.want)
		}
	}
}

func TestParsePSFilters(t *testing.T) {
	got, err := ParsePSFilters("none, fp16,sigmod:0.01+bf16")
	if err != nil || strings.Join(got, "|") != "none|fp16|sigmod:0.01,bf16" {
		t.Errorf("got %q, %v", got, err)
	}
	for _, bad := range []string{"", "fp16,,bf16", "gzip", "sigmod"} {
		if _, err := ParsePSFilters(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestRunPS runs dense and sparse rows, plain and fused, on 4 in-process
// ranks (2 servers, 2 workers): a row per model and filter, sane figures,
// and every output format.
func TestRunPS(t *testing.T) {
	for _, sparse := range []bool{false, true} {
		for _, fused := range []bool{false, true} {
			cfg := DefaultPSConfig()
			cfg.Params, cfg.Servers, cfg.Iters, cfg.Warmup, cfg.Fused = 1000, 2, 5, 1, fused
			if sparse {
				cfg.Params, cfg.Keys, cfg.Of = 0, 50, 2000
			}
			cfg.Models = []ps.Consistency{ps.BSP, ps.SSP, ps.ASP, ps.DSSP}
			cfg.Filters = []string{"none", "fp16", "sigmod:0.0005"}
			cfg.Replicate = []int{0, 1}
			cfg.Optimizer = optim.Momentum
			cfg.Timeout = 20 * time.Second
			w := local.NewWorld(4)
			w.SetTimeout(20 * time.Second)
			var emitted []PSRow
			errs := w.Run(func(c *local.Comm) error {
				_, err := RunPS(c, cfg, func(r PSRow) { emitted = append(emitted, r) })
				return err
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("sparse %v fused %v: rank %d: %v", sparse, fused, r, err)
				}
			}
			if len(emitted) != 24 {
				t.Fatalf("%d rows, want 24", len(emitted))
			}
			for i, r := range emitted {
				if r.Workers != 2 || r.Servers != 2 || !(r.TripsPerSec > 0) || !(r.TripsMin > 0) || r.TripsMin > r.TripsPerSec*1.0001 ||
					!(r.KeysPerSec > 0) || !(r.GBPerSec > 0) || r.WaitShare < 0 || r.WaitShare > 1.01 || r.Keys != cfg.KeysPerTrip() {
					t.Errorf("odd row %+v", r)
				}
				if r.Replicate != i%2 { // the rows alternate 0, 1
					t.Errorf("row %d: replicate every %d, want %d", i, r.Replicate, i%2)
				}
				if (r.Mode == "pushpull") != fused {
					t.Errorf("mode %q, fused %v", r.Mode, fused)
				}
			}
			for _, f := range Formats {
				var buf bytes.Buffer
				pw, err := NewPSWriter(&buf, f)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range emitted {
					pw.Write(r)
				}
				pw.Close()
				switch f {
				case "json":
					var rows []PSRow
					if err := json.Unmarshal(buf.Bytes(), &rows); err != nil || len(rows) != len(emitted) {
						t.Errorf("json: %v, %d rows", err, len(rows))
					}
				case "csv":
					if n := strings.Count(buf.String(), "\n"); n != len(emitted)+1 {
						t.Errorf("csv: %d lines", n)
					}
				case "table":
					if !strings.Contains(buf.String(), "trips/s/wkr") || !strings.Contains(buf.String(), emitted[0].Workload) {
						t.Errorf("table:\n%s", buf.String())
					}
				}
			}
		}
	}
}

// TestRunPSEveryRule: every optimizer rule runs on the servers with its
// own settings' defaults (LARS once failed on its zero trust coefficient
// in the middle of the run, on one rank).
func TestRunPSEveryRule(t *testing.T) {
	for _, k := range optim.Kinds {
		cfg := DefaultPSConfig()
		cfg.Params, cfg.Servers, cfg.Iters, cfg.Warmup, cfg.Optimizer = 200, 1, 2, 1, k
		cfg.Timeout = 20 * time.Second
		w := local.NewWorld(2)
		w.SetTimeout(20 * time.Second)
		errs := w.Run(func(c *local.Comm) error {
			_, err := RunPS(c, cfg, func(PSRow) {})
			return err
		})
		for r, err := range errs {
			if err != nil {
				t.Errorf("%v: rank %d: %v", k, r, err)
			}
		}
	}
}
