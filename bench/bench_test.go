package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/local"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "4K": 4096, "4k": 4096, "16M": 16 << 20, "1G": 1 << 30, "8KB": 8192, " 2M ": 2 << 20} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-4K", "4Q", "K", "1.5M", "99999999999G"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q): no error", bad)
		}
	}
}

func TestSizes(t *testing.T) {
	c := AllreduceConfig{MinBytes: 4 << 10, MaxBytes: 64 << 10, Factor: 4}
	if got := fmt.Sprint(c.Sizes()); got != "[4096 16384 65536]" {
		t.Errorf("sizes %s", got)
	}
	c = AllreduceConfig{MinBytes: 6, MaxBytes: 100, Factor: 3}
	if got := fmt.Sprint(c.Sizes()); got != "[4 16 52]" { // 6, 18, 54 rounded down to whole float32s
		t.Errorf("sizes %s", got)
	}
}

// TestRunAllreduce runs a small sweep on 3 in-process ranks: one row per
// algorithm and size, nothing wrong, positive bandwidths, ratios printable.
func TestRunAllreduce(t *testing.T) {
	cfg := DefaultAllreduceConfig()
	cfg.MinBytes, cfg.MaxBytes, cfg.Factor, cfg.Iters, cfg.Warmup = 4, 4<<10, 32, 3, 1
	cfg.Algorithms = []collectives.Algorithm{collectives.Ring, collectives.Tree}
	w := local.NewWorld(3)
	w.SetTimeout(10 * time.Second)
	var emitted []Row
	rowsBy := make([][]Row, 3)
	errs := w.Run(func(c *local.Comm) error {
		rows, err := RunAllreduce(c, cfg, func(b []Row) { emitted = append(emitted, b...) })
		rowsBy[c.Rank()] = rows
		return err
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if len(emitted) != 2*3 || len(rowsBy[1]) != 6 {
		t.Fatalf("emitted %d rows, rank 1 has %d; want 6 each", len(emitted), len(rowsBy[1]))
	}
	for _, r := range emitted {
		if r.Wrong != 0 || !(r.TimeUS > 0) || !(r.BusBW > 0) || r.Ranks != 3 || r.Count*4 != int(r.Size) {
			t.Errorf("row %+v", r)
		}
	}
	var buf bytes.Buffer
	rw, _ := NewRowWriter(&buf, "json")
	for _, r := range emitted {
		rw.Write(r)
	}
	rw.Close()
	var back []Row
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || len(back) != 6 {
		t.Fatalf("json output does not parse back (%v):\n%s", err, buf.String())
	}
}

func TestValidate(t *testing.T) {
	ok := DefaultAllreduceConfig()
	for name, mutate := range map[string]func(*AllreduceConfig){
		"min above max": func(c *AllreduceConfig) { c.MinBytes = c.MaxBytes * 2 },
		"zero min":      func(c *AllreduceConfig) { c.MinBytes = 0 },
		"factor 1":      func(c *AllreduceConfig) { c.Factor = 1 },
		"no iterations": func(c *AllreduceConfig) { c.Iters = 0 },
		"no algorithms": func(c *AllreduceConfig) { c.Algorithms = nil },
	} {
		c := ok
		mutate(&c)
		if c.Validate() == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
}

func TestWriteConsistency(t *testing.T) {
	hit := 1.5
	rows := []ConsistencyRow{{Consistency: "bsp", Straggler: "none", TimeToTarget: &hit, EpochsToHit: 2, FinalAcc: 0.9},
		{Consistency: "asp", Straggler: "3:4", FinalAcc: 0.7}}
	for format, want := range map[string]string{"table": "not reached", "csv": "asp,3:4,,0,0.7000", "json": `"time_to_target_sec": null`} {
		var b bytes.Buffer
		if err := WriteConsistency(&b, format, 0.8, rows); err != nil || !strings.Contains(b.String(), want) {
			t.Errorf("%s: %v\n%s\nwant %q", format, err, b.String(), want)
		}
	}
}
