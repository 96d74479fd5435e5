// Package stopvote is the parameter-server workers' stop vote (dml
// train's --sync ps, Trainer.Stop), free of I/O: trainer/paramserver's ps_stopvote.go
// sends and receives what it decides. Under BSP the workers are in step
// and the first one gathers their wishes and answers; under SSP, ASP and
// DSSP each worker stops at its own next boundary, and a signalled worker
// tells the others once. stopvote_test.go simulates it with notes that
// arrive late.
package stopvote

// Vote is the stop vote's rules on one worker: at each step boundary it
// takes the worker's own wish and whether a stop note arrived (from a
// signalled server, or a signalled worker under ssp, asp, dssp) and says
// whom to notify and, unless the workers must agree first (BSP), whether
// to stop.
type Vote struct {
	BSP      bool // the workers are in step: the first worker gathers the flags
	Workers  int
	Me       int  // this worker's index (0: the first worker)
	notified bool // this worker has sent the others its note
}

// Step is what a worker does at one boundary.
type Step struct {
	Notes   []int // workers to send a stop note to
	Flag    bool  // this worker's wish, note included (BSP: to the first worker)
	Decided bool  // Stop is the answer already (not BSP, or one worker)
	Stop    bool
}

// Begin is the start of the vote at a boundary.
func (v *Vote) Begin(local, note bool) Step {
	st := Step{Flag: local || note}
	if v.BSP && v.Workers > 1 {
		return st
	}
	// Not in step: each worker stops at its own next boundary once it is
	// signalled or told, and a signalled worker tells the others once.
	if local && !v.notified && v.Workers > 1 {
		v.notified = true
		st.Notes = v.Others()
	}
	st.Decided, st.Stop = true, st.Flag
	return st
}

// Gathers says this worker collects the flags and sends back the answer
// (BSP).
func (v *Vote) Gathers() bool { return v.Me == 0 }

// Others are the workers other than this one.
func (v *Vote) Others() []int {
	var out []int
	for w := range v.Workers {
		if w != v.Me {
			out = append(out, w)
		}
	}
	return out
}

// Combine is the gathering worker's answer: stop when any worker wants to.
func (v *Vote) Combine(mine bool, others []bool) bool {
	for _, f := range others {
		mine = mine || f
	}
	return mine
}
