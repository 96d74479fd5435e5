package engine

import "github.com/dml-project/dml/collectives"

// markStep tells the transport's stall inspector (collectives/stall, run by
// collectives/mpi) the global step this rank is in, so that a stall report
// names it. On other transports it does nothing.
func (j *Job) markStep(step int) { collectives.SetStep(j.Comm, step) }
