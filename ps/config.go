package ps

import (
	"fmt"
	"strings"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels/optim"
)

// Consistency is the synchronisation model the servers enforce.
type Consistency uint8

const (
	// BSP (bulk synchronous parallel): the server averages every worker's
	// step-t gradient and applies one update before any worker may pull for
	// step t+1.
	BSP Consistency = iota
	// SSP (stale synchronous parallel, Petuum): a worker at clock c may start
	// its next iteration only if c - minClock <= Config.Staleness.
	SSP
	// ASP (asynchronous parallel, Downpour SGD): workers never wait.
	ASP
	// DSSP (dynamic SSP, Zhao et al. ICDCS'19): the staleness bound moves in
	// [Config.StalenessLow, Config.StalenessHigh] as the server's
	// synchronisation controller grants extra iterations; the published
	// rule, see dssp.go.
	DSSP
)

var consistencyNames = [...]string{BSP: "bsp", SSP: "ssp", ASP: "asp", DSSP: "dssp"}

// Consistencies lists the consistency models, in the order above.
var Consistencies = []Consistency{BSP, SSP, ASP, DSSP}

// String returns the lower-case name ("bsp", "ssp", "asp", "dssp").
func (c Consistency) String() string {
	if int(c) < len(consistencyNames) {
		return consistencyNames[c]
	}
	return fmt.Sprintf("consistency(%d)", c)
}

// ParseConsistency parses "bsp", "ssp", "asp" or "dssp" (any case).
func ParseConsistency(s string) (Consistency, error) {
	for i, n := range consistencyNames {
		if strings.EqualFold(s, n) {
			return Consistency(i), nil
		}
	}
	return 0, fmt.Errorf("ps: unknown consistency %q (want bsp, ssp, asp or dssp)", s)
}

// Valid reports whether c is one of the consistency models above.
func (c Consistency) Valid() bool { return int(c) < len(consistencyNames) }

// ParseOptimizer parses a rule's name, as optim.ParseKind does.
//
// Deprecated: the update rule is an optim.Kind; use optim.ParseKind.
func ParseOptimizer(s string) (optim.Kind, error) { return optim.ParseKind(s) }

// Defaults for zero-valued Config fields.
const (
	DefaultLR      = 0.01
	DefaultEps     = 1e-10 // PyTorch Adagrad's default
	DefaultTimeout = collectives.DefaultTimeout
)

// Config is the parameter-server configuration. Every rank must pass the same
// values for the fields marked "agreed" (the servers check them against each
// worker's at NewWorker). The zero value is a usable configuration: one
// server, BSP, plain SGD with DefaultLR, DefaultTimeout.
type Config struct {
	// Servers is the number of server ranks, 0..Servers-1 (agreed). Zero means 1.
	Servers int
	// Consistency is the synchronisation model (agreed).
	Consistency Consistency
	// Staleness is SSP's bound s (agreed).
	Staleness int
	// StalenessLow and StalenessHigh are DSSP's range [sL, sU] (agreed).
	StalenessLow, StalenessHigh int

	// Optimizer, LR, Momentum, WeightDecay and Eps define the server-side
	// update, kernels/optim's rule with these hyper-parameters (agreed). LR
	// zero means DefaultLR; Eps zero means DefaultEps. The zero Optimizer is
	// optim.SGD.
	Optimizer   optim.Kind
	LR          float32
	Momentum    float32
	WeightDecay float32
	Eps         float32
	// Beta1 and Beta2 are Adam's and AdamW's (read by those rules only).
	Beta1, Beta2 float32
	// TrustCoef is LARS's trust coefficient η (read by LARS only).
	TrustCoef float32
	// TensorStarts are the first keys of the model's parameter tensors,
	// ascending from 0 (model.TensorStarts): LARS takes a trust ratio per
	// tensor. nil: each server's range is one tensor. A server computes
	// each trust ratio over the part of a tensor its range holds, so with
	// more than one server a tensor that a range boundary cuts gets one
	// trust ratio per part (a departure from LARS, which takes the whole
	// tensor's norms; with one server, or boundaries that cut no tensor,
	// the update is the allreduce one). Like the betas, TrustCoef and
	// TensorStarts are not in the worker's hello: the trainer's
	// configuration check covers them.
	TensorStarts []int

	// Timeout bounds how long anyone waits in silence. A server reports a
	// worker missing (and returns an error) when that worker has sent nothing
	// for Timeout while others wait on it, or when every remaining worker has
	// been silent for Timeout. A worker gives up on a server it has not heard
	// from for 2*Timeout (servers send keep-alives to workers they hold).
	// Zero means DefaultTimeout.
	Timeout time.Duration

	// StallWarn is the stall inspector's warning time (--stall-warn): a
	// server whose workers have been held this long, waiting for others
	// that have not pushed for the clock, reports them (Server.Warnings;
	// RunServer prints them through Warn), and again every StallWarn
	// until the round completes or Timeout gives up on them. Zero: no
	// warnings (not agreed).
	StallWarn time.Duration
	// Warn prints a stall warning (nil: a "dml: " line on standard error).
	Warn func(msg string)

	// Filters are applied, in order, to every push of a worker; each worker
	// builds its own Filter from each spec (filters keep per-worker state).
	Filters []FilterSpec

	// InlineValues makes a worker send and receive float32 values inside
	// its byte messages even when the transport moves float32 buffers
	// (Isend/Irecv), where they otherwise travel apart, without copies
	// (not agreed: servers handle both; for comparisons and tests).
	InlineValues bool

	// ReplicateEvery > 0 makes each server keep a replica of the next
	// server's key range (chain replication, replica.go), sent after
	// every ReplicateEvery-th round under BSP or update otherwise; 0:
	// none. Ignored with one server (not agreed).
	ReplicateEvery int

	// LRAt, if not nil, is the learning rate of the step of a given clock
	// (under BSP the round, else the pushing worker's clock before the
	// push): a schedule, in place of LR (not agreed: every rank computes
	// it from the same settings).
	LRAt func(clock int) float32

	// Restore, if not nil, starts the servers from a checkpoint: its
	// optimizer state and every worker's clock (the weights are
	// RunServer's initial argument). Not agreed; see snapshot.go.
	Restore *Restore

	// Now is the clock of the drivers: RunServer reads it and passes the
	// time to Server.Step and Server.Tick (the Server itself reads no
	// clock), and a Worker times its waits and its silence limit with it.
	// Nil means time.Now.
	Now func() time.Time
}

// beat is how often a server tells a held worker it is alive: Timeout/4,
// or StallWarn/2 when that is shorter, so that a held worker hears from
// its server well within its stall warning time and warns only about a
// server that is really silent.
func (c Config) beat() time.Duration {
	b := c.Timeout / 4
	if c.StallWarn > 0 && c.StallWarn/2 < b {
		b = c.StallWarn / 2
	}
	return b
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.Servers == 0 {
		c.Servers = 1
	}
	if c.LR == 0 {
		c.LR = DefaultLR
	}
	if c.Eps == 0 {
		c.Eps = DefaultEps
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate checks c (after defaults) for a job of size ranks.
func (c Config) Validate(size int) error {
	c = c.withDefaults()
	switch {
	case c.Servers < 1:
		return fmt.Errorf("ps: %d servers: need at least 1: %w", c.Servers, ErrConfig)
	case c.Servers >= size:
		return fmt.Errorf("ps: %d servers in a job of %d ranks leaves no worker: %w", c.Servers, size, ErrConfig)
	case !c.Consistency.Valid():
		return fmt.Errorf("ps: %v: %w", c.Consistency, ErrConfig)
	case c.Staleness < 0:
		return fmt.Errorf("ps: staleness %d < 0: %w", c.Staleness, ErrConfig)
	case c.Consistency == DSSP && (c.StalenessLow < 0 || c.StalenessHigh < c.StalenessLow):
		return fmt.Errorf("ps: dssp staleness range [%d,%d]: need 0 <= low <= high: %w",
			c.StalenessLow, c.StalenessHigh, ErrConfig)
	case c.Timeout < 0:
		return fmt.Errorf("ps: timeout %v < 0: %w", c.Timeout, ErrConfig)
	case c.StallWarn < 0:
		return fmt.Errorf("ps: stall warning time %v < 0: %w", c.StallWarn, ErrConfig)
	case c.ReplicateEvery < 0:
		return fmt.Errorf("ps: replicate every %d < 0: %w", c.ReplicateEvery, ErrConfig)
	}
	if err := c.optimConfig().Validate(); err != nil {
		// Both ErrConfig and the *optim.SettingError naming the field.
		return fmt.Errorf("ps: %w: %w", err, ErrConfig)
	}
	return nil
}
