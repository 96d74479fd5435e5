package trainer

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/trainer/internal/numtest"
)

// TestCompressTrains: with --compress fp16 or bf16 (with and without error
// feedback) on 3 in-process ranks, every rank ends with the same weights,
// the same with and without overlap, not fp32's (the wire is used) but
// close to them, at the same test accuracy within 0.05.
func TestCompressTrains(t *testing.T) {
	cfg := synthCfg()
	cfg.Epochs = 4
	ref := mustRun(t, 3, cfg)
	for _, tc := range []struct {
		compress string
		ef       bool
	}{{CompressFP16, false}, {CompressFP16, true}, {CompressBF16, false}, {CompressBF16, true}} {
		c := cfg
		c.Compress, c.ErrorFeedback = tc.compress, tc.ef
		var first []float32
		for _, overlap := range []bool{true, false} {
			c.Overlap = overlap
			res := mustRun(t, 3, c)
			for r := 1; r < 3; r++ {
				if !slices.Equal(res[r].Params, res[0].Params) {
					t.Fatalf("%s ef=%v overlap=%v: rank %d's weights differ from rank 0's", tc.compress, tc.ef, overlap, r)
				}
			}
			if first == nil {
				first = res[0].Params
			} else if !slices.Equal(first, res[0].Params) {
				t.Fatalf("%s ef=%v: overlap changes the weights", tc.compress, tc.ef)
			}
			if slices.Equal(res[0].Params, ref[0].Params) {
				t.Fatalf("%s ef=%v: the weights are fp32's bit for bit: nothing was compressed", tc.compress, tc.ef)
			}
			if d := numtest.MaxRelDiff(res[0].Params, ref[0].Params); d > 0.2 {
				t.Errorf("%s ef=%v: weights %.3g from fp32's", tc.compress, tc.ef, d)
			}
			if d := math.Abs(res[0].TestAcc - ref[0].TestAcc); d > 0.05 {
				t.Errorf("%s ef=%v: test accuracy %.4f, fp32 %.4f", tc.compress, tc.ef, res[0].TestAcc, ref[0].TestAcc)
			}
		}
	}
}

// TestCompressConfig: the settings --compress refuses.
func TestCompressConfig(t *testing.T) {
	for _, tc := range []struct {
		edit  func(*Config)
		field string
	}{
		{func(c *Config) { c.Compress = "fp8" }, "Compress"},
		{func(c *Config) { c.Compress, c.Sync = CompressFP16, SyncPS }, "Compress"},
		{func(c *Config) { c.Compress, c.Sync = CompressBF16, SyncDPSGD }, "Compress"},
		{func(c *Config) { c.ErrorFeedback = true }, "ErrorFeedback"},
		{func(c *Config) { c.Compress, c.Allreduce = CompressFP16, collectives.Tree }, "Compress"},
	} {
		c := synthCfg()
		tc.edit(&c)
		err := c.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%+v: error %v, want one on %s", c.Compress, err, tc.field)
		}
	}
	c := synthCfg()
	c.Compress, c.ErrorFeedback = CompressAuto, true
	if err := c.Validate(); err != nil {
		t.Errorf("auto with error feedback: %v", err)
	}
}

// TestCompressOneRank: on one rank nothing travels, so --compress and
// --error-feedback change nothing: the weights are fp32's bit for bit (as
// a device backend's one rank, which never leaves the device, gives; and
// as the sweep's families assume).
func TestCompressOneRank(t *testing.T) {
	cfg := synthCfg()
	ref := mustRun(t, 1, cfg)
	for _, w := range []string{CompressFP16, CompressBF16} {
		for _, ef := range []bool{false, true} {
			c := cfg
			c.Compress, c.ErrorFeedback = w, ef
			res := mustRun(t, 1, c)
			if !slices.Equal(res[0].Params, ref[0].Params) {
				t.Errorf("%s ef=%v on one rank: weights differ by %.3g from fp32's", w, ef, numtest.MaxRelDiff(res[0].Params, ref[0].Params))
			}
		}
	}
}

// TestCompressDefaultsHash: the settings that mean the default (Compress
// "none", LocalSteps 1) leave the configuration hash as it was, so that a
// job that names them checks equal to (and resumes the checkpoints of) one
// that does not.
func TestCompressDefaultsHash(t *testing.T) {
	cfg := synthCfg()
	for _, edit := range []func(*Config){
		func(c *Config) { c.Compress = CompressNone },
		func(c *Config) { c.LocalSteps = 1 },
	} {
		c := cfg
		edit(&c)
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		if c.Hash() != cfg.Hash() {
			t.Errorf("Compress %q LocalSteps %d: the configuration hash changed", c.Compress, c.LocalSteps)
		}
	}
}
