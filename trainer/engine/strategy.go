package engine

import (
	"fmt"
	"strings"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/config"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/model"
)

// The strategy registry. Each --sync strategy is one unit: a type in a
// package of its own above this one (trainer/allreduce, trainer/paramserver,
// trainer/decentral) that implements Unit, beside the Strategy its steps
// run through; trainer/register.go registers them.
// Whatever depends on which strategy a job uses asks the unit: the
// settings it refuses, the ranks it needs, which ranks train, how it is
// built and run, its part of a checkpoint (metadata, state, compatibility,
// resuming), whether it stops at step boundaries, and the names the
// benches know it by. The loop (loop.go) and the checkpoint machinery
// (checkpoint.go) keep only what every strategy shares.
//
// A new strategy is a Sync constant and its name (config/enums.go), its
// Register line (trainer/register.go) and its unit and Strategy in a
// strategy package: docs/CONTRIBUTING.md walks through one. This package
// names no strategy (it sits below them).
var syncUnits = make([]Unit, len(config.Syncs))

// Register makes u the unit of s, and its rules the configuration's
// (config.Register). A strategy registers once, before any job runs.
func Register(s Sync, u Unit) {
	config.Register(s, u) // panics on a Sync without a name, or one registered twice
	syncUnits[s] = u
}

// Unit is everything a --sync strategy owns besides its steps.
// BaseUnit gives the defaults of a strategy on which every rank trains
// and shares step boundaries, with one model and optimizer state on every
// rank.
type Unit interface {
	// The rules the configuration asks of it (config.Rules):
	// Validate, the settings it cannot train with; Foreign, its own
	// settings when another strategy is chosen; ValidateWorld, those that
	// cannot work on a number of ranks; Decentralized; StopsAtBoundaries.
	config.Rules
	// Help says in a few words what the strategy does (the --sync flag's
	// help lists every strategy's); its name is its Sync's (config.Syncs).
	Help() string
	// Servers is how many of the first ranks serve instead of training.
	Servers(c Config) int
	// TakesTrainState: Trainer.Start can resume it (the weights and the
	// optimizer state are the same on every rank).
	TakesTrainState() bool
	// Reshards: under c, a checkpoint resumes on another number of ranks,
	// the rest of its epoch dealt to them (reshard.go).
	Reshards(c Config) bool
	// Run trains the dense model runDense set up.
	Run(j *Job, d DenseSetup) (*Result, error)
	// RunSparse trains the sparse model (sparse-logreg) RunSparse set
	// up; the configuration refuses it under a strategy without one.
	RunSparse(j *Job, d SparseSetup) (*Result, error)
	// CheckCheckpointing refuses checkpoint settings the strategy cannot
	// honour under c.
	CheckCheckpointing(c Config, ck *Checkpointing) error
	// CheckpointMeta fills in the strategy's part of a checkpoint's
	// metadata.
	CheckpointMeta(j *Job, m *checkpointMeta)
	// Compatible says why checkpoint c cannot resume job j as far as the
	// strategy's own state goes ("" if it can).
	Compatible(j *Job, c *checkpoint) string
	// Resume hands every rank its strategy-specific part of the checkpoint
	// rank 0 read (ck: nil on the other ranks) into r. Collective.
	Resume(j *Job, ck *checkpoint, r *Resumed) error
	// Variants are the ways the benches name the strategy.
	Variants() []Variant
}

// DenseSetup is what runDense prepared for a strategy on this rank.
type DenseSetup struct {
	M      *model.Model
	Params []float32   // the initial weights (every rank's the same)
	Shard  *data.Dense // this rank's training shard (nil on a parameter server)
	// TestShard is this rank's strided shard of the test set, test the
	// whole of it (testRows rows).
	TestShard *data.Dense
	Test      data.DenseSource
	TestRows  int
}

// SparseSetup is what runSparse prepared for a strategy on this rank.
type SparseSetup struct {
	Arch   model.Arch
	Params []float32    // the initial weights
	Train  *data.Sparse // the whole training set
	Shard  *data.Sparse // this rank's training shard (nil on a parameter server)
	Test   *data.Sparse
}

// UnitOf is the registry entry of s (nil: s is not a strategy).
func UnitOf(s Sync) Unit {
	if int(s) < len(syncUnits) {
		return syncUnits[s]
	}
	return nil
}

// BaseUnit holds the defaults of Unit's methods; a unit embeds it.
type BaseUnit struct{}

func (BaseUnit) Validate(Config) error                { return nil }
func (BaseUnit) Foreign(Config) error                 { return nil }
func (BaseUnit) ValidateWorld(Config, int) error      { return nil }
func (BaseUnit) Decentralized() bool                  { return false }
func (BaseUnit) StopsAtBoundaries() bool              { return true }
func (BaseUnit) Servers(Config) int                   { return 0 }
func (BaseUnit) TakesTrainState() bool                { return false }
func (BaseUnit) Reshards(Config) bool                 { return false }
func (BaseUnit) CheckpointMeta(*Job, *checkpointMeta) {}
func (BaseUnit) CheckCheckpointing(Config, *Checkpointing) error {
	return nil
}
func (BaseUnit) Resume(*Job, *checkpoint, *Resumed) error { return nil }

// RunSparse: config.Validate refuses sparse-logreg under every strategy
// but ps.
func (BaseUnit) RunSparse(j *Job, _ SparseSetup) (*Result, error) {
	return nil, bad("Model", "sparse-logreg trains with sync ps, not %v", j.Cfg.Sync)
}

// compatible: the checkpoint holds optimizer state exactly when the
// job's optimizer keeps one.
func (BaseUnit) Compatible(j *Job, c *checkpoint) string {
	if (c.Opt != nil) != j.Cfg.Opt.Kind.HasState() {
		return fmt.Sprintf("its optimizer state does not fit %v", j.Cfg.Opt.Kind)
	}
	return ""
}

// Variant is one way of training that the benches name (`dml bench
// consistency`'s --consistency, the sweep's sync list): a strategy with
// the settings that go with it.
type Variant struct {
	// Name is the bench's name for it: the strategy's, or under ps the
	// consistency model's (bsp, ssp, asp, dssp).
	Name string
	Sync Sync
	// Consistency is the parameter server's consistency model (Sync == SyncPS).
	Consistency ps.Consistency
	// Servers: the first ranks serve (parameter servers) and do not train,
	// so a straggler must be a later rank.
	Servers bool
}

// Apply sets c's strategy to v.
func (v Variant) Apply(c *Config) {
	c.Sync = v.Sync
	if v.Servers {
		c.PS.Consistency = v.Consistency
	}
}

// Variants lists every strategy's variants, in registry order.
func Variants() []Variant {
	var out []Variant
	for _, u := range syncUnits {
		out = append(out, u.Variants()...)
	}
	return out
}

// ParseVariant finds the variant a bench names (see Variants).
func ParseVariant(name string) (Variant, error) {
	var names []string
	for _, v := range Variants() {
		if v.Name == name {
			return v, nil
		}
		names = append(names, v.Name)
	}
	return Variant{}, fmt.Errorf("unknown strategy %q (want %s)", name, strings.Join(names, ", "))
}

// SyncHelp is the --sync flag's help: every strategy's name and help.
func SyncHelp() string {
	parts := make([]string, len(syncUnits))
	for i, u := range syncUnits {
		parts[i] = Sync(i).String() + " (" + u.Help() + ")"
	}
	return "how ranks combine their work: " + strings.Join(parts, ", ")
}

// OneVariant is the variants of a strategy the benches name by its --sync
// name alone.
func OneVariant(s Sync) []Variant { return []Variant{{Name: s.String(), Sync: s}} }

// The strategies' message tags, in one table so that no two meet: the
// registry's range of collectives.TagTrainerBase (collectives/tags.go).
const (
	// TagResidue: a rank's filter residues to rank 0 for a checkpoint
	// (allreduce's error feedback, ps's filters).
	TagResidue = collectives.TagTrainerBase + iota
	// TagStop: ps bsp: a worker's flag to the first worker, and the OR back.
	TagStop
	// TagStopNote: ps: "a signal came" from a server, or from a worker
	// under ssp/asp/dssp.
	TagStopNote
	// TagRankState: dpsgd: a rank's own state to and from rank 0.
	TagRankState
)
