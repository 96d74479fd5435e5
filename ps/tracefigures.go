package ps

// TraceFigures are a worker's running totals, read around each call for a
// timeline's span arguments (the clock the call ran at, the staleness of
// the pull it made, how long the servers held it) without the copy of
// the staleness histogram that Stats makes.
type TraceFigures struct {
	Clock        int     // pushes completed: the worker's clock
	Pulls        int     // pulls completed (a fused push-pull counts)
	StalenessSum int     // the staleness of every pull completed, summed
	HeldSeconds  float64 // time the servers held this worker's requests
}

// TraceFigures returns the worker's figures now. The difference of two
// readings around one call is that call's: its pull's staleness
// (StalenessSum, when Pulls went up by one) and its hold by the
// consistency controller (HeldSeconds).
func (w *Worker) TraceFigures() TraceFigures {
	f := TraceFigures{Clock: w.clock, Pulls: w.stats.Pulls, HeldSeconds: w.stats.HeldSeconds}
	for s, n := range w.stats.Staleness.Counts {
		f.StalenessSum += s * n
	}
	return f
}
