package trainer

import (
	"bytes"
	"os"
	"testing"

	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/ps"
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
			denseOnly = true
			t.Cleanup(func() { denseOnly = false })
			dense := mustRun(t, ranks, cfg)
			denseOnly = false
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
