package trainer

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/dml-project/dml/collectives"
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

	Sync      string                `json:"sync"`      // allreduce (ps: see package ps)
	Allreduce collectives.Algorithm `json:"allreduce"` // ring, tree, mpi, auto
	EvalEvery int                   `json:"eval_every"`

	// Per-process settings, not compared between ranks.
	Timeout time.Duration `json:"-"`
	Metrics string        `json:"-"` // JSON lines file (rank 0)
	Save    string        `json:"-"` // .npz weights file (rank 0)
}

// Models lists the model names.
var Models = []string{"mlp", "softmax", "logreg"}

// DefaultConfig is `dml train` with no flags.
func DefaultConfig() Config {
	return Config{
		Model: "mlp", Hidden: []int{256, 128},
		Data:   DataConfig{Name: "fashion-mnist", Samples: 10000, Features: 20, Classes: 2, Noise: 1},
		Epochs: 5, Batch: 64, MaxSteps: -1, Seed: 1, Shuffle: true,
		Opt:  OptimizerConfig{Name: "momentum", LR: 0.05, Momentum: 0.9, Eps: 1e-10},
		Sync: "allreduce", Allreduce: collectives.Auto, EvalEvery: 1,
		Timeout: 5 * time.Minute,
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
	default:
		return fmt.Errorf("--model: unknown model %q (want mlp, softmax or logreg)", c.Model)
	}
	switch {
	case c.Batch <= 0:
		return fmt.Errorf("--batch %d must be greater than 0", c.Batch)
	case c.Epochs <= 0:
		return fmt.Errorf("--epochs %d must be greater than 0", c.Epochs)
	case c.EvalEvery < 0:
		return fmt.Errorf("--eval-every %d must not be negative", c.EvalEvery)
	case c.Sync != "allreduce":
		return fmt.Errorf("--sync %q: want allreduce", c.Sync)
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
