package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/dml-project/dml/trainer"
)

// How dml ends: the errors its commands return and the exit status each
// gives (run, main.go).

// errUsage marks errors that are the user's input: exit code 2, with a hint.
var errUsage = errors.New("usage")

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

func isUsage(err error) bool { return errors.Is(err, errUsage) || errors.Is(err, trainer.ErrUsage) }

// message is err's text without the "usage: " marker.
func message(err error) string {
	return strings.TrimPrefix(err.Error(), errUsage.Error()+": ")
}

// reported is an error already printed (by the ranks that had something
// to say): report exits 1, or 2 for a usage error, without printing it
// again.
type reported struct{ error }

func (r reported) Unwrap() error { return r.error }

// exitCode is an error that ends dml launch with a status of its own.
type exitCode struct {
	code int
	err  error
}

func (e exitCode) Error() string { return e.err.Error() }

func (e exitCode) Unwrap() error { return e.err }

// exitStatus is the shell's status for a process ended by s: 128 + its
// number (130 for SIGINT, 143 for SIGTERM).
func exitStatus(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}

// interrupted is a training run stopped by a signal (its own, or another
// rank's: then SIGTERM's status).
type interrupted struct {
	error
	status int
}

func (e interrupted) Unwrap() error { return e.error }

// quietRankWait is how long a rank other than 0 waits before it prints a
// usage error itself: mpirun kills it well before when rank 0 found the
// same error and exited.
const quietRankWait = 2 * time.Second

// envRank is this process's rank in an MPI job as its launcher tells it
// ("" outside one), readable before MPI starts.
func envRank() string {
	r := os.Getenv("OMPI_COMM_WORLD_RANK")
	if r == "" {
		r = os.Getenv("PMI_RANK")
	}
	return r
}

// printsErrors is true on the rank that reports usage errors: rank 0 of an
// MPI job (every rank sees the same flags, so one message is enough), or
// the only process.
func printsErrors() bool {
	r := envRank()
	return r == "" || r == "0"
}
