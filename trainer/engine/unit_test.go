package engine

// The engine's own tests run no strategy: package trainer registers the
// real ones, and its tests train with them. Jobs set up here (their
// schedule, their configuration checked) need a unit for their --sync;
// this one has the registry's defaults (BaseUnit) and trains nothing.
type setupOnly struct{ BaseUnit }

func (setupOnly) Help() string { return "set-up only (engine tests)" }
func (setupOnly) Run(*Job, DenseSetup) (*Result, error) {
	return nil, bad("Sync", "the engine's tests train with no strategy")
}
func (setupOnly) Variants() []Variant { return nil }

func init() { Register(SyncAllreduce, setupOnly{}) }
