package trainer

import (
	"github.com/dml-project/dml/trainer/engine"
)

// The strategies dml trains with, each registered once (strategy.go).
func init() {
	engine.Register(SyncAllreduce, allreduceUnit{})
	engine.Register(SyncPS, psUnit{})
	engine.Register(SyncDPSGD, dpsgdUnit{})
	engine.Register(SyncADPSGD, adpsgdUnit{})
}
