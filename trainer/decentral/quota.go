package decentral

// --max-steps under adpsgd. The ranks share no step boundary, so rank 0
// cannot stop them all at the same step: it learns of their steps from
// reports that arrive while they go on. Instead each rank runs its share
// of the steps left (stepQuota) and then waits, between two steps, for
// the final point; rank 0 calls it once the reports add up to the cap.
// The total is then exactly --max-steps (0: none at all, the initial
// weights saved), where a cap checked only by rank 0 overshot by the
// steps run while the reports and the call travelled. A rank at its quota
// tells its passive partners (a pause), so that a passive rank waiting to
// be averaged (maxLag) goes on without them.

// stepQuota is rank r's share (of n ranks) of maxSteps less the done steps
// a resumed run counts already: the first ranks take one more where they
// do not divide evenly. < 0: no cap.
func stepQuota(maxSteps, done, r, n int) int {
	if maxSteps < 0 {
		return -1
	}
	left := max(0, maxSteps-done)
	q := left / n
	if r < left%n {
		q++
	}
	return q
}
