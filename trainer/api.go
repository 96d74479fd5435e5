// Package trainer is data-parallel training with every --sync strategy:
// Trainer.Run sets a job up, trains it with the strategy the
// configuration names and returns the result. It registers the
// strategies (register.go) and gives engine's API its names here
// (api.go); the rest is in the packages below it, whose imports point one
// way (make shape):
//   - allreduce/, paramserver/, decentral/: the strategies, one package
//     each (allreduce's local SGD stands on decentral's local model), each
//     an engine.Unit beside the engine.Strategy its steps run through;
//   - engine/: what every strategy shares: the job, the loop, the registry,
//     checkpoints, the training state, evaluation, metrics; it names no
//     strategy;
//   - config/ (the typed Config), model/ (the architecture, a layer kind
//     per layer_*.go, the Model on a Backend, optimizers, .npz files),
//     data/ (datasets, shards, the sample order), ckpt/ (the checkpoint
//     file), gossip/ and stopvote/ (protocols free of I/O), trace/.
//
// Its tests train every strategy in one process (collectives/local);
// mpitest/ runs them under mpirun.
package trainer

// The trainer's API: engine's names under the names users know them by.
// engine.Trainer is Trainer, with its methods (Run, RunWithData,
// LastWord).

import (
	"io"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/engine"
	"github.com/dml-project/dml/trainer/model"
	"github.com/dml-project/dml/trainer/paramserver"
)

type (
	Config              = engine.Config
	PSConfig            = engine.PSConfig
	Straggle            = engine.Straggle
	Checkpointing       = engine.Checkpointing
	DataConfig          = engine.DataConfig
	ConfigError         = engine.ConfigError
	Sync                = engine.Sync
	ModelKind           = engine.ModelKind
	GPTShape            = engine.GPTShape
	LRSchedule          = engine.LRSchedule
	Result              = engine.Result
	Trainer             = engine.Trainer
	Emergency           = engine.Emergency
	ConfigMismatchError = engine.ConfigMismatchError
	StartError          = engine.StartError
	Position            = engine.Position
	Segment             = engine.Segment
	TrainState          = engine.TrainState
	Scope               = engine.Scope
	StepStats           = engine.StepStats
	EpochStats          = engine.EpochStats
	PSStats             = engine.PSStats
	GossipStats         = engine.GossipStats
	EvalResult          = engine.EvalResult
	Strategy            = engine.Strategy
	Variant             = engine.Variant
)

const (
	SyncAllreduce      = engine.SyncAllreduce
	SyncPS             = engine.SyncPS
	SyncDPSGD          = engine.SyncDPSGD
	SyncADPSGD         = engine.SyncADPSGD
	MLP                = engine.MLP
	Softmax            = engine.Softmax
	Logreg             = engine.Logreg
	SparseLogreg       = engine.SparseLogreg
	LeNet5             = engine.LeNet5
	NetFile            = engine.NetFile
	ResNet20           = engine.ResNet20
	VGG16              = engine.VGG16
	ResNet50           = engine.ResNet50
	AlexNet            = engine.AlexNet
	GPT                = engine.GPT
	CompressNone       = engine.CompressNone
	CompressFP16       = engine.CompressFP16
	CompressBF16       = engine.CompressBF16
	CompressAuto       = engine.CompressAuto
	SparseAuto         = engine.SparseAuto
	SparseOn           = engine.SparseOn
	SparseOff          = engine.SparseOff
	DefaultBucketBytes = engine.DefaultBucketBytes
	DefaultImageShape  = engine.DefaultImageShape
	DefaultKeep        = engine.DefaultKeep
	DefaultSeqLen      = engine.DefaultSeqLen
	MaxSeqLen          = engine.MaxSeqLen
	MaxStaleness       = engine.MaxStaleness
	MaxStraggleFactor  = engine.MaxStraggleFactor
	ScopeGlobal        = engine.ScopeGlobal
	ScopeWorker        = engine.ScopeWorker
)

var (
	ErrCheckpoint     = engine.ErrCheckpoint
	Syncs             = engine.Syncs
	Models            = engine.Models
	DataNames         = engine.DataNames
	DefaultGPT        = engine.DefaultGPT
	DefaultConfig     = engine.DefaultConfig
	ParseSync         = engine.ParseSync
	ParseModel        = engine.ParseModel
	ParseLRSchedule   = engine.ParseLRSchedule
	BuildArch         = engine.BuildArch
	NetLayers         = engine.NetLayers
	AvailableMemory   = engine.AvailableMemory
	CheckMemory       = engine.CheckMemory
	ErrNonFinite      = engine.ErrNonFinite
	ErrConfigMismatch = engine.ErrConfigMismatch
	ErrInterrupted    = engine.ErrInterrupted
	ErrUsage          = engine.ErrUsage
	ErrConfig         = engine.ErrConfig
	ErrNoLastWord     = engine.ErrNoLastWord
	ErrStartFailed    = engine.ErrStartFailed
)

// AgreeToStart is engine.AgreeToStart.
func AgreeToStart(c collectives.Comm, what string, err error, fingerprint uint64) error {
	return engine.AgreeToStart(c, what, err, fingerprint)
}

// CheckSameConfig is engine.CheckSameConfig.
func CheckSameConfig(c collectives.Comm, cfg Config) error { return engine.CheckSameConfig(c, cfg) }

// ComparedFields is engine.ComparedFields.
func ComparedFields() []string { return engine.ComparedFields() }

// DenseFingerprint is engine.DenseFingerprint.
func DenseFingerprint(sets ...*data.Dense) uint64 { return engine.DenseFingerprint(sets...) }

// IsTerminal is engine.IsTerminal.
func IsTerminal(w io.Writer) bool { return engine.IsTerminal(w) }

// ListCheckpoints is engine.ListCheckpoints.
func ListCheckpoints(dir string) ([]string, error) { return engine.ListCheckpoints(dir) }

// ListEmergencyParts is engine.ListEmergencyParts.
func ListEmergencyParts(dir string) ([]string, error) { return engine.ListEmergencyParts(dir) }

// SourceFingerprint is engine.SourceFingerprint.
func SourceFingerprint(sets ...data.DenseSource) (uint64, error) {
	return engine.SourceFingerprint(sets...)
}

// SparseFingerprint is engine.SparseFingerprint.
func SparseFingerprint(sets ...*data.Sparse) uint64 { return engine.SparseFingerprint(sets...) }

// SyncHelp is engine.SyncHelp.
func SyncHelp() string { return engine.SyncHelp() }

// Variants is engine.Variants.
func Variants() []Variant { return engine.Variants() }

// ParseVariant is engine.ParseVariant.
func ParseVariant(name string) (Variant, error) { return engine.ParseVariant(name) }

// Evaluate is engine.Evaluate.
func Evaluate(c collectives.Comm, b kernels.Backend, arch model.Arch, st model.State, set data.DenseSource, batch int) (EvalResult, error) {
	return engine.Evaluate(c, b, arch, st, set, batch)
}

// EvaluateSparse is paramserver.EvaluateSparse.
func EvaluateSparse(c collectives.Comm, arch model.Arch, params []float32, set *data.Sparse) (EvalResult, error) {
	return paramserver.EvaluateSparse(c, arch, params, set)
}

// StopVoteWait is paramserver.StopVoteWait.
func StopVoteWait(timeout time.Duration) time.Duration { return paramserver.StopVoteWait(timeout) }
