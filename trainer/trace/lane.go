package trace

import "fmt"

// Lane is the goroutine role a span ran on: a timeline draws one thread per
// lane for each rank, so that spans on one lane nest (a step holds forward,
// backward and the update) and work that runs at the same time as the step
// (a bucket's AllReduce under the backward pass, a passive rank's server
// answering a partner) gets a row of its own.
type Lane uint8

// The lanes. LaneStep is the zero value: what Tracer.Begin records.
const (
	LaneStep   Lane = iota // the training loop's goroutine: step, forward, backward, update, waits
	LaneComm               // a communication goroutine running beside the step (overlapped AllReduce, gossip)
	LaneServer             // a serving loop: a parameter server rank, an AD-PSGD passive rank's server
	numLanes
)

var laneNames = [numLanes]string{"step loop", "communication", "server"}

// String returns the lane's name as a timeline shows it ("step loop").
func (l Lane) String() string {
	if l < numLanes {
		return laneNames[l]
	}
	return fmt.Sprintf("Lane(%d)", int(l))
}

// OnLane returns a Tracer whose spans are recorded on lane l, for the code
// a goroutine of that role runs. A Recorder (or a Tracer OnLane returned for
// one) gives a view of the same Recorder; any other Tracer, Nop and nil
// included, is returned as it is, so the call costs nothing with tracing
// off. Call it once when the goroutine is set up, not per span.
func OnLane(t Tracer, l Lane) Tracer {
	switch t := t.(type) {
	case *Recorder:
		return &laneTracer{r: t, lane: l}
	case *laneTracer:
		return &laneTracer{r: t.r, lane: l}
	}
	return t
}

// laneTracer is a Recorder seen from one lane.
type laneTracer struct {
	r    *Recorder
	lane Lane
}

func (t *laneTracer) Begin(name string) Span { return t.r.begin(name, t.lane) }
