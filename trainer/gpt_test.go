package trainer

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/ps"
)

// textOnce writes the GPT tests' text once per test binary, into a
// folder TestMain removes.
var (
	textOnce sync.Once
	textPath string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if textPath != "" {
		os.RemoveAll(filepath.Dir(textPath))
	}
	os.Exit(code)
}

// gptText is a text with structure a small GPT learns in a few epochs:
// words of a small vocabulary in sentences of a fixed pattern (about
// 6 KB, the same bytes every run).
func gptText(t *testing.T) string {
	textOnce.Do(func() {
		words := []string{"alpha", "beta", "gamma", "delta", "rank", "ring", "sum", "step"}
		r := rand.New(rand.NewPCG(1, 2))
		var b strings.Builder
		for b.Len() < 6000 {
			fmt.Fprintf(&b, "the %s %s the %s.\n", words[r.IntN(len(words))], words[r.IntN(4)], words[4+r.IntN(4)])
		}
		dir, err := os.MkdirTemp("", "dml-gpt-test")
		if err == nil {
			textPath = filepath.Join(dir, "text.txt")
			err = os.WriteFile(textPath, []byte(b.String()), 0o644)
		}
		if err != nil {
			textPath = ""
		}
	})
	if textPath == "" {
		panic("could not write the GPT tests' text")
	}
	return textPath
}

// gptCfg is a one-block GPT on gptText, AdamW.
func gptCfg(t *testing.T) Config {
	cfg := synthCfg()
	cfg.Model = GPT
	cfg.GPT = GPTShape{Layers: 1, Heads: 2, Embed: 16}
	cfg.Data = DataConfig{Name: "text", Train: gptText(t), SeqLen: 16}
	cfg.Opt.Kind, cfg.Opt.LR = optim.AdamW, 3e-3
	cfg.Opt.Beta1, cfg.Opt.Beta2, cfg.Opt.Eps, cfg.Opt.WeightDecay = 0.9, 0.95, 1e-8, 0.1
	cfg.Batch, cfg.Epochs = 8, 3
	return cfg
}

// TestGPTEveryStrategy: the GPT trains under every --sync strategy, every
// rank ending with the same weights, and learns (the loss falls well
// below a uniform guess's, ln 256 ≈ 5.5).
func TestGPTEveryStrategy(t *testing.T) {
	for _, tc := range append(everySync, syncCase{"ps-ssp", 3, func(c *Config) {
		c.Sync, c.PS.Servers, c.PS.Consistency, c.PS.Staleness = SyncPS, 1, ps.SSP, 2
	}}, syncCase{"localsgd", 2, func(c *Config) { c.LocalSteps = 2 }}) {
		t.Run(tc.name, func(t *testing.T) {
			cfg := gptCfg(t)
			tc.set(&cfg)
			res := mustRun(t, tc.ranks, cfg)
			last := res[len(res)-1]
			eps := last.Epochs
			if len(eps) == 0 || !(eps[len(eps)-1].Loss < eps[0].Loss) || !(eps[len(eps)-1].Loss < 3.4) {
				t.Fatalf("epochs %+v: not learning", eps)
			}
			evaluated := 0
			for _, r := range res {
				if len(r.Epochs) == 0 {
					continue // a server
				}
				e := r.Epochs[len(r.Epochs)-1]
				if e.SeqLen != 16 {
					t.Errorf("last epoch's seq len %d, want 16", e.SeqLen)
				}
				if e.TestLoss != nil { // the ranks that evaluate (ps: the reporting worker)
					evaluated++
					if !(*e.TestLoss < 3.4) {
						t.Errorf("test loss %v", *e.TestLoss)
					}
				}
			}
			if evaluated == 0 {
				t.Error("no rank reports a test loss")
			}
			for r := range res {
				if res[r].Params != nil && !equalFloats(res[r].Params, last.Params) {
					t.Fatalf("rank %d's final weights differ", r)
				}
			}
		})
	}
}

// TestGPTSyncEquivalence: a GPT trained on N ranks × batch b has the
// weights of 1 rank × N·b (windows are samples; each sample's loss is the
// mean over its positions).
func TestGPTSyncEquivalence(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			cfg := gptCfg(t)
			cfg.Epochs = 1
			checkOneRankEquivalent(t, n, cfg)
		})
	}
}

// gptInto makes c train gptCfg's GPT and data (a checkpoint case: the
// case sets the optimizer and the epochs).
func gptInto(c *Config) {
	g := gptCfg(nil)
	c.Model, c.GPT, c.Data = g.Model, g.GPT, g.Data
}
