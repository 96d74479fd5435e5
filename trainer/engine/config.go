package engine

import "github.com/dml-project/dml/trainer/config"

// A job's configuration is package config's: these names keep trainer's
// API as it was before the configuration had a package of its own.

type (
	Config        = config.Config
	PSConfig      = config.PSConfig
	Straggle      = config.Straggle
	Checkpointing = config.Checkpointing
	DataConfig    = config.DataConfig
	ConfigError   = config.ConfigError
	Sync          = config.Sync
	ModelKind     = config.ModelKind
	GPTShape      = config.GPTShape
	LRSchedule    = config.LRSchedule
)

const (
	SyncAllreduce = config.SyncAllreduce
	SyncPS        = config.SyncPS
	SyncDPSGD     = config.SyncDPSGD
	SyncADPSGD    = config.SyncADPSGD

	MLP          = config.MLP
	Softmax      = config.Softmax
	Logreg       = config.Logreg
	SparseLogreg = config.SparseLogreg
	LeNet5       = config.LeNet5
	NetFile      = config.NetFile
	ResNet20     = config.ResNet20
	VGG16        = config.VGG16
	ResNet50     = config.ResNet50
	AlexNet      = config.AlexNet
	GPT          = config.GPT

	CompressNone = config.CompressNone
	CompressFP16 = config.CompressFP16
	CompressBF16 = config.CompressBF16
	CompressAuto = config.CompressAuto
	SparseAuto   = config.SparseAuto
	SparseOn     = config.SparseOn
	SparseOff    = config.SparseOff

	DefaultBucketBytes = config.DefaultBucketBytes
	DefaultImageShape  = config.DefaultImageShape
	DefaultKeep        = config.DefaultKeep
	DefaultSeqLen      = config.DefaultSeqLen
	MaxSeqLen          = config.MaxSeqLen
	MaxStaleness       = config.MaxStaleness
	MaxStraggleFactor  = config.MaxStraggleFactor
)

var (
	Syncs      = config.Syncs
	Models     = config.Models
	DataNames  = config.DataNames
	DefaultGPT = config.DefaultGPT

	DefaultConfig   = config.DefaultConfig
	ParseSync       = config.ParseSync
	ParseModel      = config.ParseModel
	ParseLRSchedule = config.ParseLRSchedule
	BuildArch       = config.BuildArch
	NetLayers       = config.NetLayers
	AvailableMemory = config.AvailableMemory
	CheckMemory     = config.CheckMemory
)
