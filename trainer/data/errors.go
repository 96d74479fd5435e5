package data

import (
	"errors"
	"fmt"
)

// Sentinel errors callers may test with errors.Is. Errors returned by this
// package wrap them together with the file, line or index a person needs.
var (
	// ErrFormat: the input is not a well-formed file of the expected format
	// (bad magic, wrong dimensions, truncated, trailing data, a bad LIBSVM
	// token, a label out of range).
	ErrFormat = errors.New("malformed data")
	// ErrTooLarge: the data would not fit the limits of the representation
	// (e.g. a dense matrix of more than MaxDenseElements values).
	ErrTooLarge = errors.New("data too large")
	// ErrIndex: a sample index outside [0, Rows).
	ErrIndex = errors.New("sample index out of range")
	// ErrShortBuffer: a caller-provided destination is too small.
	ErrShortBuffer = errors.New("destination buffer too small")
	// ErrMoreRanksThanSamples: a dataset of n samples cannot give every one
	// of size > n ranks a non-empty shard.
	ErrMoreRanksThanSamples = errors.New("more ranks than samples")
	// ErrConfig: a generator configuration is invalid.
	ErrConfig = errors.New("invalid configuration")
)

// kindError is an error whose message is err's but which also matches kind
// (one of the sentinels above) under errors.Is, without repeating the
// sentinel's text in the message.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

// errorf formats an error like fmt.Errorf (including %w) that also matches
// kind under errors.Is.
func errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, err: fmt.Errorf(format, args...)}
}
