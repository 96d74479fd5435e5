// Package config is a training job's configuration: the typed Config the
// command line parses its flags into, its enums (Sync, ModelKind), and
// Validate, the one place a setting is checked, whose errors are
// *ConfigErrors naming the field. It also holds what follows from a
// Config alone: the network it builds (BuildArch, NetLayers; the presets
// in netPresets), the data it names (DataConfig: Validate, Open, Load),
// and the memory checks on what loading them would take (CheckMemory).
//
// It sits below package trainer and knows none of its strategies. Each
// --sync strategy is a unit of trainer's registry, which registers the
// unit's Rules here (Register), as database/sql's drivers register
// themselves: Validate asks the chosen strategy what it cannot train with
// and every other strategy which of its own settings were given, without
// naming any.
//
// Where things are (no cycle between files: make shape): enums.go
// (Sync, ModelKind, GPTShape and the presets), errors.go (ErrUsage,
// ConfigError), config.go (Config, PSConfig, Checkpointing, Validate,
// Hash, and Rules with their registry), arch.go,
// dataset.go, memory.go, lrschedule.go and lossscale.go (the parsed
// --lr-schedule and --loss-scale).
package config
