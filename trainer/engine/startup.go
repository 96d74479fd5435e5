package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"unsafe"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/trainer/data"
)

// ErrStartFailed is wrapped by the *StartError every rank returns when a
// rank failed in the start-up work that AgreeToStart closes (opening its
// backend, loading its data, sizing its model).
var ErrStartFailed = errors.New("the job could not start")

// StartError is AgreeToStart's error, the same kind on every rank, so that
// no rank is left waiting for one that gave up and the job can end without
// MPI_Abort (whose banner drowns the message). Err is this rank's own
// error (nil where this rank was fine: then the error names the ranks that
// failed). Quiet is true where the message need not be printed: a
// lower-numbered rank failed with the same message, or this rank was fine
// and is not rank 0.
type StartError struct {
	Rank   int
	What   string // what the ranks were doing: "open the backend"
	Failed []int  // the ranks that failed
	Err    error
	Quiet  bool
}

// Error is this rank's own error, or which ranks failed.
func (e *StartError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	whose := "their"
	if len(e.Failed) == 1 {
		whose = "its"
	}
	return fmt.Sprintf("%s could not %s (see %s message): the job stops", rankList(e.Failed), e.What, whose)
}

// Unwrap returns ErrStartFailed and this rank's own error.
func (e *StartError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrStartFailed}
	}
	return []error{ErrStartFailed, e.Err}
}

func rankList(ranks []int) string {
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = fmt.Sprint(r)
	}
	if len(ranks) == 1 {
		return "rank " + s[0]
	}
	return "ranks " + strings.Join(s, ", ")
}

// AgreeToStart closes a piece of start-up work that each rank does on its
// own and may fail at alone (a file missing on one node, a library or a
// device missing, memory too small): every rank calls it with its own
// error (nil if it is fine) and a fingerprint of what it loaded (0: none).
// One all-gather later every rank knows every rank's outcome:
//   - some rank failed: every rank returns a *StartError (this rank's own
//     error, or one naming the ranks that failed);
//   - the fingerprints differ from rank 0's: every rank returns an error
//     wrapping ErrConfigMismatch naming the ranks that differ (e.g. ranks
//     given different --train files: Config.Hash leaves paths out);
//   - otherwise nil.
//
// In a world of one rank it returns err as it is.
func AgreeToStart(c collectives.Comm, what string, err error, fingerprint uint64) error {
	if c.Size() == 1 {
		return err
	}
	// Per rank: the status (0: fine; else a hash of the message, never 0)
	// and the fingerprint, as float32 bit patterns (only copied, never
	// computed with, so every pattern survives).
	var status uint32
	if err != nil {
		h := fnv.New32a()
		h.Write([]byte(err.Error()))
		status = h.Sum32() | 1
	}
	all, gerr := collectives.AllgatherUint64(c, []uint64{uint64(status), fingerprint})
	if gerr != nil {
		if err != nil {
			return err
		}
		return fmt.Errorf("start-up check (%s): %w", what, gerr)
	}
	statusOf := func(r int) uint32 { return uint32(all[2*r]) }
	fpOf := func(r int) uint64 { return all[2*r+1] }
	var failed []int
	for r := range c.Size() {
		if statusOf(r) != 0 {
			failed = append(failed, r)
		}
	}
	if len(failed) > 0 {
		se := &StartError{Rank: c.Rank(), What: what, Failed: failed, Err: err}
		if err == nil {
			se.Quiet = c.Rank() != 0
		} else {
			// Print a message once: the lowest rank that failed with it.
			se.Quiet = slices.ContainsFunc(failed, func(r int) bool { return r < c.Rank() && statusOf(r) == status })
		}
		return se
	}
	var differ []string
	for r := 1; r < c.Size(); r++ {
		if fpOf(r) != fpOf(0) {
			differ = append(differ, fmt.Sprintf("rank %d (%016x)", r, fpOf(r)))
		}
	}
	if len(differ) > 0 {
		return fmt.Errorf("%s loaded training or test data that differ from rank 0's (data fingerprint %016x): give every rank the same data: %w",
			strings.Join(differ, ", "), fpOf(0), ErrConfigMismatch)
	}
	return nil
}

// DenseFingerprint hashes the shape and contents of a training and a test
// set (either may be nil): ranks that loaded different data get different
// fingerprints (with overwhelming probability; this guards against
// mistakes, not adversaries). It reads each value once, 8 bytes at a time.
func DenseFingerprint(sets ...*data.Dense) uint64 {
	var f fingerprint
	for _, d := range sets {
		if d == nil {
			f.word(0)
			continue
		}
		f.word(uint64(d.Rows), uint64(d.Cols), uint64(d.Classes), uint64(len(d.X)), uint64(len(d.Y)))
		f.bytes(asBytes(d.X))
		f.bytes(asBytes(d.Y))
	}
	return f.h
}

// SourceFingerprint is DenseFingerprint for data sources: a *data.Dense
// is hashed as DenseFingerprint hashes it, a *data.IDXSource by its shape
// and its files' Digest (the files as stored, so that a rank need not load
// the whole set to compare it with the others').
func SourceFingerprint(sets ...data.DenseSource) (uint64, error) {
	var f fingerprint
	for _, s := range sets {
		switch s := s.(type) {
		case nil:
			f.word(0)
		case *data.Dense:
			f.word(DenseFingerprint(s))
		case interface {
			data.DenseSource
			Digest() (uint64, error)
		}: // IDX, CIFAR-10 and CIFAR-100 files
			rows, cols, classes := s.Shape()
			d, err := s.Digest()
			if err != nil {
				return 0, err
			}
			f.word(uint64(rows), uint64(cols), uint64(classes), d)
		default:
			return 0, fmt.Errorf("no fingerprint for data source %T", s)
		}
	}
	return f.h, nil
}

// SparseFingerprint is DenseFingerprint for sparse sets.
func SparseFingerprint(sets ...*data.Sparse) uint64 {
	var f fingerprint
	for _, s := range sets {
		if s == nil {
			f.word(0)
			continue
		}
		f.word(uint64(s.Rows), uint64(s.Cols), uint64(s.Classes), uint64(len(s.Indptr)), uint64(len(s.Indices)), uint64(len(s.Values)), uint64(len(s.Y)))
		f.bytes(asBytes(s.Indptr))
		f.bytes(asBytes(s.Indices))
		f.bytes(asBytes(s.Values))
		f.bytes(asBytes(s.Y))
		f.bytes(asBytes(s.LabelValues))
	}
	return f.h
}

// fingerprint is a 64-bit multiply-xorshift hash over 8-byte words.
type fingerprint struct{ h uint64 }

const fpMul = 0x9e3779b97f4a7c15

func (f *fingerprint) word(ws ...uint64) {
	for _, w := range ws {
		f.h = (f.h ^ w) * fpMul
		f.h ^= f.h >> 29
	}
}

// bytes hashes b in four independent lanes of 8-byte words (a multiply's
// latency, not its throughput, bounds one lane), then folds the lanes, the
// tail and the length into f.
func (f *fingerprint) bytes(b []byte) {
	n := len(b)
	h := [4]uint64{f.h, f.h + 1, f.h + 2, f.h + 3}
	for ; len(b) >= 32; b = b[32:] {
		for l := range h {
			h[l] = (h[l] ^ binary.LittleEndian.Uint64(b[8*l:])) * fpMul
			h[l] ^= h[l] >> 29
		}
	}
	f.word(h[:]...)
	for ; len(b) >= 8; b = b[8:] {
		f.word(binary.LittleEndian.Uint64(b))
	}
	var tail [8]byte
	copy(tail[:], b)
	f.word(binary.LittleEndian.Uint64(tail[:]), uint64(n))
}

// asBytes views a slice of fixed-size numbers as its bytes.
func asBytes[T int32 | int64 | float32](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}
