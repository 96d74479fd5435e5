package trainer

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/config"
	"github.com/dml-project/dml/trainer/model"
)

// sparseTableCfg is a model file's network with an untied embedding of
// 512 rows (the text has some thirty distinct bytes) and a position table
// longer than the sequence, on gptText, through the parameter server.
func sparseTableCfg(t *testing.T, c ps.Consistency) Config {
	cfg := gptCfg(t)
	cfg.Model, cfg.GPT = NetFile, GPTShape{}
	cfg.Net = []model.LayerSpec{
		{Kind: model.KindEmbedding, Name: "wte", Rows: 512, Out: 16},
		{Kind: model.KindPosEmbed, Name: "wpe", Rows: 24},
		{Kind: model.KindLayerNorm, Name: "ln"},
		{Kind: model.KindLinear, Name: "head", Out: 256},
	}
	cfg.Sync, cfg.PS.Servers, cfg.PS.Consistency = SyncPS, 2, c
	cfg.Epochs = 2
	return cfg
}

// TestPSSparsePush: under the parameter server a model with an untied
// embedding pulls and pushes only the rows each batch names. With plain
// SGD a row left out would have been stepped by a gradient of 0, and the
// step reads no row it did not pull, so the weights and training losses
// are bit for bit those of dense pulls and pushes, in fewer bytes; with momentum and
// weight decay the rows no batch names keep their first weights (the
// servers step only what is pushed), where dense pushes would decay them.
func TestPSSparsePush(t *testing.T) {
	for _, c := range []ps.Consistency{ps.BSP, ps.ASP} {
		t.Run(c.String(), func(t *testing.T) {
			cfg := sparseTableCfg(t, c)
			cfg.Opt.Kind, cfg.Opt.LR, cfg.Opt.WeightDecay = optim.SGD, 0.05, 0
			ranks := cfg.PS.Servers + 1 // one worker: ASP's order is then fixed
			if c == ps.BSP {
				ranks++
			}
			sparse := mustRun(t, ranks, cfg)
			cfg.PS.SparseRows = config.SparseOff
			dense := mustRun(t, ranks, cfg)
			w := cfg.PS.Servers
			if !equalFloats(sparse[w].Params, dense[w].Params) {
				t.Fatal("sparse pushes trained other weights than dense pushes under plain SGD")
			}
			for e := range dense[w].Epochs {
				if s, d := sparse[w].Epochs[e].Loss, dense[w].Epochs[e].Loss; s != d {
					t.Fatalf("epoch %d: training loss %v with sparse pulls, %v dense", e+1, s, d)
				}
			}
			sb, db := psBytes(sparse[w], true), psBytes(dense[w], true)
			if sb <= 0 || 2*sb > db {
				t.Errorf("sparse pushes took %d bytes, dense %d: want under half", sb, db)
			}
			// The pulls' replies: the last epoch's includes a whole
			// model, pulled before evaluating.
			sr, dr := psBytes(sparse[w], false), psBytes(dense[w], false)
			if sr <= 0 || 2*sr > dr {
				t.Errorf("sparse pulls took %d bytes, dense %d: want under half", sr, dr)
			}
		})
	}
	cfg := sparseTableCfg(t, ps.BSP)
	cfg.Opt.Kind, cfg.Opt.Momentum, cfg.Opt.WeightDecay = optim.Momentum, 0.9, 0.01
	res := mustRun(t, cfg.PS.Servers+2, cfg)[cfg.PS.Servers]
	first := res.Arch.InitParams(cfg.Seed)
	text, err := os.ReadFile(cfg.Data.Train)
	if err != nil {
		t.Fatal(err)
	}
	wte := res.Arch.Layers()[0]
	for row := 0; row < 512; row++ {
		lo := wte.WOff + 16*row
		same := equalFloats(res.Params[lo:lo+16], first[lo:lo+16])
		if named := row < 256 && bytes.IndexByte(text, byte(row)) >= 0; named == same {
			t.Fatalf("row %d (in the text: %v): kept its first weights: %v", row, named, same)
		}
	}
}

// psBytes sums a worker's push bytes (or the bytes its pulls received)
// over its epochs.
func psBytes(r *Result, push bool) int64 {
	var n int64
	for _, e := range r.Epochs {
		switch {
		case e.PSStats == nil:
		case push:
			n += e.PSStats.PushBytes
		default:
			n += e.PSStats.BytesReceived
		}
	}
	return n
}

// TestSparseRowsRefused: the values --sparse-rows cannot train with: an
// unknown one (under any strategy), on under Downpour, on or off under
// another strategy or for sparse-logreg, and on for a network without
// sparse rows (when the job builds it). Auto and on or off under ps are
// accepted.
func TestSparseRowsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config)
	}{
		{"unknown", func(c *Config) { c.Sync, c.PS.SparseRows = SyncPS, "sometimes" }},
		{"downpour", func(c *Config) {
			c.Sync, c.PS.Consistency, c.PS.FetchEvery, c.PS.PushEvery, c.PS.SparseRows = SyncPS, ps.ASP, 2, 2, SparseOn
		}},
		{"allreduce-on", func(c *Config) { c.PS.SparseRows = SparseOn }},
		{"allreduce-off", func(c *Config) { c.PS.SparseRows = SparseOff }},
		{"allreduce-unknown", func(c *Config) { c.PS.SparseRows = "yes" }},
		{"sparse-logreg", func(c *Config) {
			c.Sync, c.Model, c.Data, c.PS.SparseRows = SyncPS, SparseLogreg, DataConfig{Name: "synthetic-sparse"}, SparseOn
		}},
	} {
		cfg := synthCfg()
		tc.set(&cfg)
		var ce *ConfigError
		if err := cfg.Validate(); !errors.As(err, &ce) || ce.Field != "PS.SparseRows" {
			t.Errorf("%s: %v, want a ConfigError on PS.SparseRows", tc.name, err)
		}
	}
	for _, v := range []string{"", SparseAuto, SparseOn, SparseOff} {
		cfg := sparseTableCfg(t, ps.BSP)
		cfg.PS.SparseRows = v
		if err := cfg.Validate(); err != nil {
			t.Errorf("%q under ps: %v", v, err)
		}
	}
	if a, b := synthCfg(), synthCfg(); func() bool { b.PS.SparseRows = SparseAuto; return a.Hash() != b.Hash() }() {
		t.Error(`--sparse-rows auto hashes other than "" (the default before the setting)`)
	}
	// A network without sparse rows, on: the job refuses it.
	cfg := psCfg(ps.BSP, 1)
	cfg.PS.SparseRows = SparseOn
	_, errs := runWorld(t, 3, cfg, nil)
	refused := 0
	for r, err := range errs {
		var ce *ConfigError
		if errors.As(err, &ce) && ce.Field == "PS.SparseRows" {
			refused++
		} else if err == nil {
			t.Errorf("rank %d: an MLP with --sparse-rows on trained", r)
		}
	}
	if refused == 0 {
		t.Errorf("an MLP with --sparse-rows on: %v, want a ConfigError on PS.SparseRows", errs)
	}
}
