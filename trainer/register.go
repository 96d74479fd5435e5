package trainer

// The strategies dml trains with, each registered once (strategy.go).
func init() {
	registerUnit(SyncAllreduce, allreduceUnit{})
	registerUnit(SyncPS, psUnit{})
	registerUnit(SyncDPSGD, dpsgdUnit{})
	registerUnit(SyncADPSGD, adpsgdUnit{})
}
