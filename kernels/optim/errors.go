package optim

import "errors"

// What a bad setting is.

// ErrConfig is wrapped by every error Validate and ParseKind return.
var ErrConfig = errors.New("optim: invalid optimizer configuration")

// SettingError reports one bad setting. Setting is the Config field's name
// ("Kind", "LR", "Momentum", "WeightDecay", "Eps"), so that a command line
// can name its own flag; Msg is the message a person reads.
type SettingError struct {
	Setting string
	Msg     string
}

func (e *SettingError) Error() string { return e.Msg }

// Unwrap returns ErrConfig.
func (e *SettingError) Unwrap() error { return ErrConfig }
