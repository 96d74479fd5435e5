package engine

import (
	"errors"
	"fmt"

	"github.com/dml-project/dml/trainer/config"
	"github.com/dml-project/dml/trainer/model"
)

// The errors a run returns. A bad setting is package config's
// (*ConfigError, wrapping ErrConfig and ErrUsage).

// ErrNonFinite reports a loss or gradient that became NaN or ±Inf.
var ErrNonFinite = model.ErrNonFinite

// ErrConfigMismatch reports ranks started with different settings.
var ErrConfigMismatch = errors.New("ranks disagree on the configuration")

// ErrInterrupted is returned (wrapped) by Run when Trainer.Stop asked for a
// stop: training ended early at a step boundary, after writing a final
// checkpoint when Checkpointing.Dir is set.
var ErrInterrupted = errors.New("training interrupted")

// ErrUsage marks errors in how the job was started (config.ErrUsage).
var ErrUsage = config.ErrUsage

// ErrConfig is wrapped by every *ConfigError (config.ErrConfig).
var ErrConfig = config.ErrConfig

// bad is a *ConfigError for field.
func bad(field, format string, args ...any) error {
	return &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
}
