package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/ckpt"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/gossip"
	"github.com/dml-project/dml/trainer/model"
)

// Config is one training job, in typed values: the command line parses its
// flags into one (enums through the Parse functions and the flag.Value
// methods of enums.go) and Validate checks it, in one place. Every rank must hold
// the same Config (apart from the per-process settings at the end); Run
// checks that first.
type Config struct {
	Model  ModelKind `json:"model"`
	Hidden []int     `json:"hidden"` // hidden layer sizes of the mlp
	// Net is a network's layers (Model NetFile: read from a model file;
	// their content, not the file's path, is what ranks compare).
	Net []model.LayerSpec `json:"net,omitempty"`
	// GPT is the gpt model's shape (0s: DefaultGPT's); its sequence
	// length is the text's (Data.SeqLen).
	GPT GPTShape `json:"gpt,omitzero"`
	// Augment is the training images' augmentation (data.ParseAugment:
	// "crop", "flip", "crop,flip"; "": none).
	Augment string `json:"augment,omitempty"`

	Data     DataConfig   `json:"data"`
	Epochs   int          `json:"epochs"`
	Batch    int          `json:"batch"`     // per rank
	MaxSteps int          `json:"max_steps"` // < 0: no limit; 0: save the initial weights
	Seed     uint64       `json:"seed"`
	Shuffle  bool         `json:"shuffle"`
	Opt      optim.Config `json:"optimizer"`
	// LRSchedule, WarmupEpochs and LRScaleRanks make the learning rate of
	// each step a function of the epoch and the ranks (schedule.go):
	// "constant" (""), "step:E1,E2,…:GAMMA" or "cosine"; a linear warm-up
	// over the first WarmupEpochs epochs; Opt.LR times the training ranks.
	LRSchedule   string  `json:"lr_schedule,omitempty"`
	WarmupEpochs float64 `json:"warmup_epochs,omitempty"`
	LRScaleRanks bool    `json:"lr_scale_ranks,omitempty"`
	// ClipNorm > 0 scales a step's gradient down to that L2 norm when it
	// is longer (clip.go). 0: no clipping.
	ClipNorm float32 `json:"clip_norm,omitempty"`

	Sync      Sync                  `json:"sync"`
	Allreduce collectives.Algorithm `json:"allreduce"` // ring, tree, mpi, auto
	// Compress is how the allreduce strategy's gradient buckets travel
	// (trainer/allreduce/compress.go): "" or "none" (float32), "fp16", "bf16", or "auto"
	// (fp16 where a start-up measurement finds it faster). ErrorFeedback
	// adds each rank's rounding residue to its next gradient.
	Compress      string `json:"compress,omitempty"`
	ErrorFeedback bool   `json:"error_feedback,omitempty"`
	// LocalSteps > 1 is local SGD under allreduce (trainer/allreduce/sync_localsgd.go): each
	// rank steps its own model, and the models are averaged every
	// LocalSteps steps. 0 and 1: the gradients are summed every step.
	LocalSteps int `json:"local_steps,omitempty"`
	// Accumulate > 1 is gradient accumulation, under every strategy: a
	// step is Accumulate micro-batches of Batch rows per rank, their
	// gradients summed on each rank, then the step's exchange and update
	// (as a batch Accumulate times larger, with a model that holds Batch
	// rows; model.Accumulator). 0 and 1: a step is one batch.
	Accumulate int `json:"accumulate,omitempty"`
	// SyncBN makes batch norm normalise each training batch with the
	// statistics of every training rank's batch (SyncBatchNorm, where the
	// ranks step together: allreduce, dpsgd, ps with bsp): N ranks × batch
	// b then train the weights of 1 rank × N·b with batch norm too.
	SyncBN bool `json:"sync_bn,omitempty"`
	// LossScale is loss scaling under allreduce (trainer/allreduce/lossscale.go): "" or
	// "off" (none), "dynamic" (PyTorch's GradScaler: the step of a
	// gradient that overflows is skipped and the scale halved), or a
	// static scale ("1024"). The command line makes it dynamic with
	// --precision fp16.
	LossScale string `json:"loss_scale,omitempty"`
	// BucketBytes caps the gradient buckets one AllReduce call sums
	// (bucketPlan); 0: one bucket, the whole gradient.
	BucketBytes int      `json:"bucket_bytes"`
	PS          PSConfig `json:"ps"` // with Sync == SyncPS
	// Topology is the graph dpsgd and adpsgd average over.
	Topology  gossip.Topology `json:"topology"`
	EvalEvery int             `json:"eval_every"`
	Straggle  Straggle        `json:"straggle"`

	// Per-process settings, not compared between ranks.
	//
	// Overlap reduces the gradient buckets on a goroutine of its own while
	// the backward pass goes on (host-memory gradients); off, they are
	// reduced after it. The weights are the same either way, so ranks may
	// differ (the command line decides per node, by its free cores).
	Overlap bool          `json:"-"`
	Timeout time.Duration `json:"-"`
	Metrics string        `json:"-"` // JSON lines file (written by the reporting rank: 0, or the first worker under ps)
	Save    string        `json:"-"` // .npz weights file (the reporting rank)

	// StallWarn is --stall-warn: parameter servers report workers that
	// hold a round up for this long (ps.Config.StallWarn); 0: off.
	StallWarn time.Duration `json:"-"`
}

// PSConfig is the parameter server's part of a job (see package ps).
type PSConfig struct {
	Servers     int            `json:"servers"` // ranks 0..Servers-1 serve; the rest are workers
	Consistency ps.Consistency `json:"consistency"`
	Staleness   int            `json:"staleness"` // ssp's s
	// StalenessLow and StalenessHigh are dssp's range [sL, sU].
	StalenessLow  int    `json:"staleness_low"`
	StalenessHigh int    `json:"staleness_high"`
	Filters       string `json:"filters"` // push filters: sigmod:T, fp16, bf16, comma-separated (ps.ParseFilters)
	// ReplicateEvery is how often each server sends the previous one a
	// replica of its key range (ps.Config.ReplicateEvery): every N BSP
	// rounds, or N updates under ssp, asp and dssp. 0: auto (every round
	// when the job writes emergency checkpoints, else never); -1: never.
	ReplicateEvery int `json:"replicate_every,omitempty"`
	// FetchEvery and PushEvery are Downpour SGD's n_fetch and n_push
	// (Dean et al. 2012; trainer/paramserver/downpour.go): a dense worker fetches
	// the weights every FetchEvery steps and pushes the sum of its
	// gradients every PushEvery steps, stepping its own copy in between.
	// 0 means 1 (every step, as without them), so that a job that does
	// not set them keeps its configuration hash.
	FetchEvery int `json:"fetch_every,omitempty"`
	PushEvery  int `json:"push_every,omitempty"`
	// SparseRows is whether a dense model's workers pull and push only
	// the table rows each batch reaches (an untied embedding's, a position
	// table's past the sequence; model.SparseKeys): SparseOn, SparseOff,
	// or SparseAuto ("" too) where such rows are at least an eighth of the
	// model.
	SparseRows string `json:"sparse_rows,omitempty"`
}

// The values of PSConfig.SparseRows.
const (
	SparseAuto = "auto"
	SparseOn   = "on"
	SparseOff  = "off"
)

// FetchPeriod is FetchEvery with 0 read as 1.
func (p PSConfig) FetchPeriod() int { return max(1, p.FetchEvery) }

// PushPeriod is PushEvery with 0 read as 1.
func (p PSConfig) PushPeriod() int { return max(1, p.PushEvery) }

// Downpour: a worker fetches or pushes less often than every step.
func (p PSConfig) Downpour() bool { return p.FetchPeriod() > 1 || p.PushPeriod() > 1 }

// Straggle slows one rank down for experiments: each of its steps takes
// Factor times as long as its computation did (it sleeps the difference).
type Straggle struct {
	Rank   int     `json:"rank"` // -1: nobody
	Factor float64 `json:"factor"`
}

// DefaultBucketBytes is the default gradient bucket cap (--bucket-mb):
// measured on the MLPs of docs/results.md (see bucketPlan and its
// overlap table).
const DefaultBucketBytes = 1 << 20

// DefaultConfig is `dml train` with no flags.
func DefaultConfig() Config {
	return Config{
		Model: MLP, Hidden: []int{256, 128},
		Data:   DataConfig{Name: "fashion-mnist", Samples: 10000, Features: 20, Classes: 2, Noise: 1, NNZ: 50},
		Epochs: 5, Batch: 64, MaxSteps: -1, Seed: 1, Shuffle: true,
		Opt:  optim.Config{Kind: optim.Momentum, LR: 0.05, Momentum: 0.9, Eps: 1e-10},
		Sync: SyncAllreduce, Allreduce: collectives.Auto, BucketBytes: DefaultBucketBytes, Overlap: true, EvalEvery: 1,
		PS:       PSConfig{Servers: 1, Consistency: ps.BSP, Staleness: 3, StalenessLow: 1, StalenessHigh: 4},
		Straggle: Straggle{Rank: -1, Factor: 1},
		Timeout:  collectives.DefaultTimeout,
	}
}

// MaxStaleness bounds --staleness and --staleness-range: far beyond any
// useful bound (it is counted in steps), and small enough that what is
// sized by it (dssp keeps a count per value of sU−sL) stays small.
const MaxStaleness = 1 << 20

// MaxStraggleFactor bounds --straggle's factor: a step of one second
// slowed by it still fits a time.Duration (the sleep is computed in one).
const MaxStraggleFactor = 1e9

// Validate reports the first bad setting as a *ConfigError. The
// strategies' rules are asked through the registry (Register), which
// package trainer fills: a program that validates a Config imports
// trainer too. Every
// floating-point setting, whatever it is for, must be finite: one check
// (finiteFloats) walks them all, so that a setting added later is covered
// too.
func (c Config) Validate() error {
	if err := finiteFloats(reflect.ValueOf(c), ""); err != nil {
		return err
	}
	if _, err := data.ParseAugment(c.Augment); err != nil {
		return Bad("Augment", "%v", err)
	}
	for _, check := range []func() error{c.validateModel, c.validateRun, c.validateExchange} {
		if err := check(); err != nil {
			return err
		}
	}
	if c.Data.Name == "synthetic-sparse" && c.Model != SparseLogreg {
		return Bad("Data.Name", "synthetic-sparse is for model sparse-logreg")
	}
	if err := c.Sync.Rules().Validate(c); err != nil {
		return err
	}
	if _, err := collectives.ParseAlgorithm(string(c.Allreduce)); err != nil {
		return Bad("Allreduce", "%v", err)
	}
	if err := c.Opt.Validate(); err != nil {
		var se *optim.SettingError
		if errors.As(err, &se) {
			return &ConfigError{Field: "Opt." + se.Setting, Msg: se.Msg}
		}
		return Bad("Opt", "%v", err)
	}
	return c.Data.Validate()
}

// validateModel: the model and its own settings.
func (c Config) validateModel() error {
	if c.Model != NetFile && len(c.Net) > 0 {
		return Bad("Net", "is set, but the model is %v: a model file's network is --model file", c.Model)
	}
	if c.Model != GPT {
		for _, f := range []struct {
			name string
			v    int
		}{{"GPT.Layers", c.GPT.Layers}, {"GPT.Heads", c.GPT.Heads}, {"GPT.Embed", c.GPT.Embed}} {
			if f.v != 0 {
				return Bad(f.name, "%d is the gpt's (Config.Model gpt); model %v has no such setting", f.v, c.Model)
			}
		}
	}
	switch c.Model {
	case MLP:
		if len(c.Hidden) == 0 {
			return Bad("Hidden", "is empty: the mlp needs at least one hidden layer (or use model softmax)")
		}
		for _, h := range c.Hidden {
			if h <= 0 {
				return Bad("Hidden", "layer size %d must be positive", h)
			}
		}
	case Softmax, Logreg:
	case GPT:
		g := c.GPT.OrDefaults()
		switch {
		case c.GPT.Layers < 0:
			return Bad("GPT.Layers", "%d must be positive (0: the default, %d)", c.GPT.Layers, DefaultGPT.Layers)
		case c.GPT.Heads < 0:
			return Bad("GPT.Heads", "%d must be positive (0: the default, %d)", c.GPT.Heads, DefaultGPT.Heads)
		case c.GPT.Embed < 0:
			return Bad("GPT.Embed", "%d must be positive (0: the default, %d)", c.GPT.Embed, DefaultGPT.Embed)
		case g.Embed%g.Heads != 0:
			return Bad("GPT.Heads", "%d does not divide the width %d: embed must be a multiple of heads", g.Heads, g.Embed)
		case g.Params(c.Data.EffectiveSeqLen()) > model.MaxParams:
			return Bad("GPT.Layers", "%d with Config.GPT.Embed %d makes %.3g parameters, more than 2^40: lower Config.GPT.Layers or Config.GPT.Embed", g.Layers, g.Embed, g.Params(c.Data.EffectiveSeqLen()))
		case c.Data.Name != "text":
			return Bad("Model", "gpt trains on a token sequence: --data text --train FILE")
		}
	case NetFile:
		if len(c.Net) == 0 {
			return Bad("Net", "is empty: a network from a model file needs its layers")
		}
	case SparseLogreg:
		if c.Sync != SyncPS {
			return Bad("Model", "sparse-logreg trains with sync ps: workers pull and push only the keys their batch touches")
		}
		if !c.Data.Sparse() {
			return Bad("Model", "sparse-logreg reads sparse data: data libsvm or synthetic-sparse")
		}
	default:
		if !c.Model.IsPreset() {
			return Bad("Model", "%v is not a model (want %s)", c.Model, strings.Join(modelNames[:], ", "))
		}
	}
	return nil
}

// validateRun: the batch, epochs, strategy and topology names, the
// learning-rate schedule, clipping, Downpour's periods.
func (c Config) validateRun() error {
	switch {
	case c.Batch <= 0:
		return Bad("Batch", "%d must be greater than 0", c.Batch)
	case c.Epochs <= 0:
		return Bad("Epochs", "%d must be greater than 0", c.Epochs)
	case c.EvalEvery < 0:
		return Bad("EvalEvery", "%d must not be negative", c.EvalEvery)
	case int(c.Sync) >= len(syncNames):
		return Bad("Sync", "%v: want %s", c.Sync, strings.Join(Syncs, ", "))
	case c.Sync.Rules() == nil: // a program that imports config without package trainer
		return Bad("Sync", "%v: no strategy is registered for it (package trainer registers them)", c.Sync)
	case int(c.Topology) >= len(gossip.Topologies):
		return Bad("Topology", "%v: want %s", c.Topology, strings.Join(gossip.Topologies, ", "))
	case c.BucketBytes < 0:
		return Bad("BucketBytes", "%d must not be negative (0: one bucket)", c.BucketBytes)
	case c.Straggle.Rank >= 0 && !(c.Straggle.Factor >= 1):
		return Bad("Straggle", "factor %v must be at least 1", c.Straggle.Factor)
	case c.Straggle.Factor > MaxStraggleFactor:
		return Bad("Straggle", "factor %v must be at most %g", c.Straggle.Factor, float64(MaxStraggleFactor))
	}
	if sc, err := ParseLRSchedule(c.LRSchedule); err != nil {
		return Bad("LRSchedule", "%v", err)
	} else if n := len(sc.Milestones); n > 0 && sc.Milestones[n-1] >= c.Epochs {
		return Bad("LRSchedule", "%q: milestone %d is not before the last epoch (%d): the rate would never drop there", c.LRSchedule, sc.Milestones[n-1], c.Epochs)
	}
	switch {
	case c.WarmupEpochs < 0 || c.WarmupEpochs > float64(c.Epochs):
		return Bad("WarmupEpochs", "%v: want 0 to the epochs (%d)", c.WarmupEpochs, c.Epochs)
	case c.ClipNorm < 0:
		return Bad("ClipNorm", "%v must not be negative (0: no clipping)", c.ClipNorm)
	case c.ClipNorm > 0 && c.Model == SparseLogreg:
		return Bad("ClipNorm", "%v: sparse-logreg pushes the keys of a batch, not a whole gradient to clip", c.ClipNorm)
	case c.PS.FetchEvery < 0:
		return Bad("PS.FetchEvery", "%d must be at least 1", c.PS.FetchEvery)
	case c.PS.PushEvery < 0:
		return Bad("PS.PushEvery", "%d must be at least 1", c.PS.PushEvery)
	}
	return nil
}

// validateExchange: how gradients or models travel (compression, local
// SGD, accumulation, loss scaling): the values here; which strategy may
// use them is the strategies' own (their Rules' Validate and Foreign).
func (c Config) validateExchange() error {
	switch c.Compress {
	case "", CompressNone, CompressFP16, CompressBF16, CompressAuto:
	default:
		return Bad("Compress", "%q: want none, fp16, bf16 or auto", c.Compress)
	}
	switch c.PS.SparseRows {
	case "", SparseAuto, SparseOn, SparseOff:
	default:
		return Bad("PS.SparseRows", "%q: want auto, on or off", c.PS.SparseRows)
	}
	switch {
	case c.LocalSteps < 0:
		return Bad("LocalSteps", "%d: want 1 or more (1: every step's gradients are summed)", c.LocalSteps)
	case c.Accumulate < 0:
		return Bad("Accumulate", "%d: want 1 or more (1: a step is one batch)", c.Accumulate)
	}
	if _, err := ParseLossScale(c.LossScale); err != nil {
		return Bad("LossScale", "%v", err)
	}
	// A strategy's own settings, given while another strategy is chosen.
	for s, r := range rules {
		if Sync(s) == c.Sync || r == nil {
			continue
		}
		if err := r.Foreign(c); err != nil {
			return err
		}
	}
	return nil
}

// Validate reports the first bad parameter-server setting (Validate asks
// it through the ps strategy's rules).
func (p PSConfig) Validate() error {
	switch {
	case p.Servers < 1:
		return Bad("PS.Servers", "%d must be at least 1", p.Servers)
	case !p.Consistency.Valid():
		return Bad("PS.Consistency", "%v is not bsp, ssp, asp or dssp", p.Consistency)
	case p.Staleness < 0:
		return Bad("PS.Staleness", "%d must not be negative", p.Staleness)
	case p.StalenessLow < 0:
		return Bad("PS.StalenessLow", "%d,%d: want 0 ≤ sL ≤ sU", p.StalenessLow, p.StalenessHigh)
	case p.StalenessHigh < p.StalenessLow:
		return Bad("PS.StalenessHigh", "%d,%d: want 0 ≤ sL ≤ sU", p.StalenessLow, p.StalenessHigh)
	case p.Staleness > MaxStaleness:
		return Bad("PS.Staleness", "%d must be at most %d", p.Staleness, MaxStaleness)
	case p.StalenessHigh > MaxStaleness:
		return Bad("PS.StalenessHigh", "%d,%d: sU must be at most %d", p.StalenessLow, p.StalenessHigh, MaxStaleness)
	case p.ReplicateEvery < -1:
		return Bad("PS.ReplicateEvery", "%d: want -1 (never), 0 (auto) or a positive count", p.ReplicateEvery)
	case p.SparseRows == SparseOn && p.Downpour():
		return Bad("PS.SparseRows", "on: Downpour's pushes (Config.PS.PushEvery, Config.PS.FetchEvery above 1) sum several batches, which reach more rows than one; they stay dense")
	}
	filters, err := ps.ParseFilters(p.Filters)
	if err != nil {
		return Bad("PS.Filters", "%q: %v", p.Filters, err)
	}
	for _, f := range filters {
		if sm, ok := f.(ps.SignificantlyModified); ok && math.IsInf(float64(sm.Threshold), 0) {
			return Bad("PS.Filters", "%q: threshold %v must be finite", p.Filters, sm.Threshold)
		}
	}
	return nil
}

// ValidateWorld reports settings that cannot work in a job of size ranks
// (the strategy's, Rules.ValidateWorld, and the straggler's rank). Its
// errors are *ConfigErrors. c must be valid (Validate).
func (c Config) ValidateWorld(size int) error {
	if r := c.Sync.Rules(); r != nil {
		if err := r.ValidateWorld(c, size); err != nil {
			return err
		}
	}
	if c.Straggle.Rank >= size {
		return Bad("Straggle", "rank %d is not in this job of %d ranks", c.Straggle.Rank, size)
	}
	return nil
}

// Hash fingerprints the settings every rank must share. It never fails:
// a Config that JSON cannot hold (a NaN or ±Inf, which Validate refuses
// before any rank hashes) is hashed from its Go syntax instead, which
// spells every float, NaN and ±Inf included.
func (c Config) Hash() uint64 {
	c.Data.Dir, c.Data.Train, c.Data.Test = "", "", ""
	// The per-process settings (json:"-") are not compared.
	c.Overlap, c.Timeout, c.Metrics, c.Save = false, 0, "", ""
	// 1 means what 0 does (every step): the hash of a job that does not
	// use Downpour stays as it was before the settings.
	if c.PS.FetchEvery == 1 {
		c.PS.FetchEvery = 0
	}
	if c.PS.PushEvery == 1 {
		c.PS.PushEvery = 0
	}
	// Likewise "none" is what "" does (float32 buckets), and LocalSteps 1
	// what 0 does (the gradients summed every step).
	if c.Compress == CompressNone {
		c.Compress = ""
	}
	if c.PS.SparseRows == SparseAuto {
		c.PS.SparseRows = ""
	}
	if c.LocalSteps == 1 {
		c.LocalSteps = 0
	}
	b, err := json.Marshal(c)
	if err != nil {
		b = fmt.Appendf(nil, "%#v", c)
	}
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// ServerConfig turns the job's settings into package ps's.
func (c Config) ServerConfig() (ps.Config, error) {
	filters, err := ps.ParseFilters(c.PS.Filters)
	if err != nil {
		return ps.Config{}, err
	}
	return ps.Config{
		Servers: c.PS.Servers, Consistency: c.PS.Consistency, Staleness: c.PS.Staleness,
		StalenessLow: c.PS.StalenessLow, StalenessHigh: c.PS.StalenessHigh,
		Optimizer: c.Opt.Kind, LR: c.Opt.LR, Momentum: c.Opt.Momentum, WeightDecay: c.Opt.WeightDecay, Eps: c.Opt.Eps,
		Beta1: c.Opt.Beta1, Beta2: c.Opt.Beta2, TrustCoef: c.Opt.TrustCoef,
		Timeout: c.Timeout, StallWarn: c.StallWarn, Filters: filters, ReplicateEvery: c.PS.ReplicateEvery,
	}, nil
}

// ReportingRank is the rank that reports (prints, writes --metrics and
// --save): 0, or the first worker under --sync ps.
func (c Config) ReportingRank() int {
	if c.Sync == SyncPS {
		return c.PS.Servers
	}
	return 0
}

// Compress values of Config.Compress.
const (
	CompressNone = "none"
	CompressFP16 = "fp16"
	CompressBF16 = "bf16"
	CompressAuto = "auto"
)

// Compresses: the configuration asks for 16-bit buckets (fp16, bf16 or
// auto; "" and "none" are float32).
func (c Config) Compresses() bool { return c.Compress != "" && c.Compress != CompressNone }

// DefaultKeep is how many checkpoints a folder keeps by default (--keep).
const DefaultKeep = 3

// Checkpointing is when and where a job writes checkpoints, and what it
// resumes from. The zero value writes none and starts fresh.
type Checkpointing struct {
	// Dir is the folder of the checkpoints ("": none are written).
	Dir string
	// Every writes one every that many steps (counted from the start of
	// the first run, so a resumed job keeps the schedule); EveryEpochs one
	// at the end of every that many epochs. Zero: not on that schedule.
	Every, EveryEpochs int
	// Keep is how many of the newest checkpoints stay in Dir (0: DefaultKeep).
	Keep int
	// ResumeLatest resumes from the newest valid checkpoint in Dir (falling
	// back to older ones, saying so; with none at all, starting fresh);
	// ResumeFile from that file.
	ResumeLatest bool
	ResumeFile   string
	// Emergency keeps, on every rank that holds the whole training state
	// (--sync allreduce), a copy of the state at its last step boundary,
	// which Trainer.LastWord writes when a peer is found dead (lastword.go).
	Emergency bool
}

// Enabled: checkpoints are written (Dir is set).
func (c *Checkpointing) Enabled() bool { return c != nil && c.Dir != "" }

// Resuming: the job resumes from a checkpoint (the newest, or a file).
func (c *Checkpointing) Resuming() bool { return c != nil && (c.ResumeLatest || c.ResumeFile != "") }

// Due reports whether a checkpoint is written at the boundary before next.
func (c *Checkpointing) Due(next ckpt.Position) bool {
	if !c.Enabled() {
		return false
	}
	return c.Every > 0 && next.Steps%c.Every == 0 ||
		c.EveryEpochs > 0 && next.Step == 0 && next.Epoch > 1 && (next.Epoch-1)%c.EveryEpochs == 0
}

// Rules is what the configuration asks of a --sync strategy. Each strategy
// is a unit of package trainer's registry (its strategy.go); the unit
// registers its Rules here for its Sync, as database/sql's drivers register
// themselves, so that Validate can ask the strategies without this package
// knowing them. A Sync without registered rules is not a strategy, and
// Validate refuses it.
type Rules interface {
	// Validate reports the settings the strategy cannot train with
	// (*ConfigErrors naming Config fields).
	Validate(c Config) error
	// Foreign reports the settings that are this strategy's own (local
	// SGD, compression, Downpour's intervals, …) when c chooses another
	// strategy: each strategy says what is its own, once.
	Foreign(c Config) error
	// ValidateWorld reports the settings that cannot work on size ranks.
	ValidateWorld(c Config, size int) error
	// Decentralized: the ranks average models between neighbours.
	Decentralized() bool
	// StopsAtBoundaries: the ranks that train share step boundaries, where
	// a stop is honoured and checkpoints are written.
	StopsAtBoundaries() bool
}

// rules are the registered strategies' rules, by Sync.
var rules [len(syncNames)]Rules

// Register makes r the rules of the strategy s. The registry is filled
// once, at init: registering a Sync without a name, or one twice, panics.
func Register(s Sync, r Rules) {
	switch {
	case int(s) >= len(rules):
		panic(fmt.Sprintf("config.Register: %v has no name in Syncs", s))
	case rules[s] != nil:
		panic(fmt.Sprintf("config.Register: %v registered twice", s))
	}
	rules[s] = r
}

// Decentralized says whether s averages models between neighbours (dpsgd,
// adpsgd) instead of combining gradients.
func (s Sync) Decentralized() bool { r := s.Rules(); return r != nil && r.Decentralized() }

// Rules is the strategy s's rules: nil where s is not a registered
// strategy.
func (s Sync) Rules() Rules {
	if int(s) < len(rules) {
		return rules[s]
	}
	return nil
}

// StopsAtBoundaries reports whether a stop (trainer.Trainer.Stop) is
// honoured under c: not under adpsgd, whose ranks share no step loop to
// agree in (a signal should end such a job the ordinary way).
func (c Config) StopsAtBoundaries() bool {
	r := c.Sync.Rules()
	return r != nil && r.StopsAtBoundaries()
}
