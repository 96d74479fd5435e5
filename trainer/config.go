package trainer

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/ps"
)

// Config is one training job. Every rank must hold the same Config (apart
// from the paths, which may differ between nodes); Run checks that first.
type Config struct {
	Model  string `json:"model"`  // mlp, softmax, logreg
	Hidden []int  `json:"hidden"` // hidden layer sizes of the mlp

	Data     DataConfig      `json:"data"`
	Epochs   int             `json:"epochs"`
	Batch    int             `json:"batch"`     // per rank
	MaxSteps int             `json:"max_steps"` // < 0: no limit; 0: save the initial weights
	Seed     uint64          `json:"seed"`
	Shuffle  bool            `json:"shuffle"`
	Opt      OptimizerConfig `json:"optimizer"`

	Sync      string                `json:"sync"`      // allreduce or ps
	Allreduce collectives.Algorithm `json:"allreduce"` // ring, tree, mpi, auto
	PS        PSConfig              `json:"ps"`        // with Sync "ps"
	EvalEvery int                   `json:"eval_every"`
	Straggle  Straggle              `json:"straggle"`

	// Per-process settings, not compared between ranks.
	Timeout time.Duration `json:"-"`
	Metrics string        `json:"-"` // JSON lines file (written by the reporting rank: 0, or the first worker under ps)
	Save    string        `json:"-"` // .npz weights file (the reporting rank)
}

// Models lists the model names.
var Models = []string{"mlp", "softmax", "logreg", "sparse-logreg"}

// PSConfig is the parameter server's part of a job (see package ps).
type PSConfig struct {
	Servers     int    `json:"servers"`     // ranks 0..Servers-1 serve; the rest are workers
	Consistency string `json:"consistency"` // bsp, ssp, asp, dssp
	Staleness   int    `json:"staleness"`   // ssp's s
	// StalenessLow and StalenessHigh are dssp's range [sL, sU].
	StalenessLow  int    `json:"staleness_low"`
	StalenessHigh int    `json:"staleness_high"`
	Filters       string `json:"filters"` // push filters: sigmod:T, fp16, bf16, comma-separated
}

// Validate reports a bad parameter-server setting.
func (p PSConfig) Validate() error {
	if p.Servers < 1 {
		return fmt.Errorf("--servers %d must be at least 1", p.Servers)
	}
	if _, err := ps.ParseConsistency(p.Consistency); err != nil {
		return fmt.Errorf("--consistency: %q is not bsp, ssp, asp or dssp", p.Consistency)
	}
	switch {
	case p.Staleness < 0:
		return fmt.Errorf("--staleness %d must not be negative", p.Staleness)
	case p.StalenessLow < 0 || p.StalenessHigh < p.StalenessLow:
		return fmt.Errorf("--staleness-range %d,%d: want 0 ≤ sL ≤ sU", p.StalenessLow, p.StalenessHigh)
	}
	if _, err := ps.ParseFilters(p.Filters); err != nil {
		return fmt.Errorf("--filters: %v", err)
	}
	return nil
}

// Straggle slows one rank down for experiments: each of its steps takes
// Factor times as long as its computation did (it sleeps the difference).
type Straggle struct {
	Rank   int     `json:"rank"` // -1: nobody
	Factor float64 `json:"factor"`
}

// DefaultConfig is `dml train` with no flags.
func DefaultConfig() Config {
	return Config{
		Model: "mlp", Hidden: []int{256, 128},
		Data:   DataConfig{Name: "fashion-mnist", Samples: 10000, Features: 20, Classes: 2, Noise: 1, NNZ: 50},
		Epochs: 5, Batch: 64, MaxSteps: -1, Seed: 1, Shuffle: true,
		Opt:  OptimizerConfig{Name: "momentum", LR: 0.05, Momentum: 0.9, Eps: 1e-10},
		Sync: "allreduce", Allreduce: collectives.Auto, EvalEvery: 1,
		PS:       PSConfig{Servers: 1, Consistency: "bsp", Staleness: 3, StalenessLow: 1, StalenessHigh: 4},
		Straggle: Straggle{Rank: -1, Factor: 1},
		Timeout:  5 * time.Minute,
	}
}

// Validate reports the first bad setting, in words a user can act on.
func (c Config) Validate() error {
	switch c.Model {
	case "mlp":
		if len(c.Hidden) == 0 {
			return fmt.Errorf("--hidden: the mlp needs at least one hidden layer (or use --model softmax)")
		}
		for _, h := range c.Hidden {
			if h <= 0 {
				return fmt.Errorf("--hidden: layer size %d must be positive", h)
			}
		}
	case "softmax", "logreg":
	case "sparse-logreg":
		if c.Sync != "ps" {
			return fmt.Errorf("--model sparse-logreg trains with --sync ps: workers pull and push only the keys their batch touches")
		}
		if !c.Data.Sparse() {
			return fmt.Errorf("--model sparse-logreg reads sparse data: --data libsvm or synthetic-sparse")
		}
	default:
		return fmt.Errorf("--model: unknown model %q (want mlp, softmax, logreg or sparse-logreg)", c.Model)
	}
	switch {
	case c.Batch <= 0:
		return fmt.Errorf("--batch %d must be greater than 0", c.Batch)
	case c.Epochs <= 0:
		return fmt.Errorf("--epochs %d must be greater than 0", c.Epochs)
	case c.EvalEvery < 0:
		return fmt.Errorf("--eval-every %d must not be negative", c.EvalEvery)
	case c.Sync != "allreduce" && c.Sync != "ps":
		return fmt.Errorf("--sync %q: want allreduce or ps", c.Sync)
	case c.Straggle.Rank >= 0 && !(c.Straggle.Factor >= 1):
		return fmt.Errorf("--straggle: factor %v must be at least 1", c.Straggle.Factor)
	}
	if c.Data.Name == "synthetic-sparse" && c.Model != "sparse-logreg" {
		return fmt.Errorf("--data synthetic-sparse is for --model sparse-logreg")
	}
	if c.Sync == "ps" {
		if err := c.PS.Validate(); err != nil {
			return err
		}
	}
	if _, err := collectives.ParseAlgorithm(string(c.Allreduce)); err != nil {
		return fmt.Errorf("--allreduce: %v", err)
	}
	if err := c.Opt.Validate(); err != nil {
		return fmt.Errorf("--optimizer: %v", err)
	}
	return c.Data.Validate()
}

// Hash fingerprints the settings every rank must share.
func (c Config) Hash() uint64 {
	c.Data.Dir, c.Data.Train, c.Data.Test = "", "", ""
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // a Config always marshals
	}
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}
