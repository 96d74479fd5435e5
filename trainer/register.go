package trainer

import (
	"github.com/dml-project/dml/trainer/allreduce"
	"github.com/dml-project/dml/trainer/decentral"
	"github.com/dml-project/dml/trainer/engine"
	"github.com/dml-project/dml/trainer/paramserver"
)

// The strategies dml trains with, each registered once (engine.Register).
func init() {
	engine.Register(SyncAllreduce, allreduce.Unit{})
	engine.Register(SyncPS, paramserver.Unit{})
	engine.Register(SyncDPSGD, decentral.DPSGD{})
	engine.Register(SyncADPSGD, decentral.ADPSGD{})
}
