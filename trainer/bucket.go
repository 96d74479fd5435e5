package trainer

import (
	"fmt"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/trainer/model"
	"github.com/dml-project/dml/trainer/trace"
)

// A bucket is a contiguous piece of the gradient, Grads[lo:hi], that one
// AllReduce call sums. Buckets are whole layers: the backward pass finishes
// a layer's weight and bias gradient at once (model.GradHook), so a bucket
// is ready when the lowest layer in it is.
type bucket struct {
	lo, hi int
}

// bucketPlan cuts a model's gradient (and its GradStats slots) into
// buckets, in the order the backward pass completes them: the last layer's
// bucket first. As in PyTorch DDP, layers are taken from the last one
// towards the first and a bucket closes before it would grow past capBytes;
// a layer larger than capBytes is a bucket of its own. capBytes ≤ 0 means
// one bucket, the whole gradient: what dml did before buckets existed, bit
// for bit.
//
// The GradStats slots (the loss sum and correct count) sit after the last
// layer's gradient and travel with the first bucket, the one holding the
// last layer: it is sent first, so the statistics are reduced with the
// gradient in one call as before.
//
// Every rank derives the same plan from the same architecture and capBytes
// (both are in the configuration every rank checks), so every rank makes
// the same AllReduce calls in the same order. For a fixed plan the result
// does not depend on whether the buckets overlap the backward pass; between
// plans it can differ in the last bit at 3 or more ranks (a ring sums each
// element in an order set by its position in the bucket).
func bucketPlan(arch model.Arch, capBytes int) []bucket {
	layers := arch.Layers()
	end := arch.NumParams() + model.GradStats
	if capBytes <= 0 {
		return []bucket{{lo: 0, hi: end}}
	}
	var plan []bucket
	cur := bucket{lo: end, hi: end}
	for k := len(layers) - 1; k >= 0; k-- {
		l := layers[k]
		if cur.lo < cur.hi && 4*(cur.hi-l.WOff) > capBytes {
			plan = append(plan, cur)
			cur = bucket{lo: cur.lo, hi: cur.lo}
		}
		cur.lo = l.WOff
	}
	return append(plan, cur)
}

// bucketTimes are one step's AllReduce timings: busy is the time spent in
// AllReduce calls, hidden the part of it that ran while the backward pass
// was still running.
type bucketTimes struct {
	busy, hidden time.Duration
}

// overlapper AllReduces a step's buckets on a goroutine of its own while
// the backward pass goes on: the gradient hook hands it each bucket as the
// bucket's lowest layer completes, and wait collects the step's outcome.
// Only that goroutine calls the Allreducer (and so the transport) between
// the first hand-over and wait; the Comm is used by one goroutine at a
// time, as MPI's THREAD_SERIALIZED level asks.
//
// The buckets are disjoint pieces of the gradient buffer, and the backward
// pass writes only the pieces of layers not yet handed over, so the two
// goroutines never touch the same memory.
type overlapper struct {
	ar   *collectives.Allreducer
	tr   trace.Tracer
	plan []bucket
	jobs chan []float32     // a bucket to reduce; nil ends the step
	res  chan overlapResult // one per step

	// Used by the step's goroutine only.
	grads []float32 // the gradient (and stats), host memory
	next  int       // plan[next] is the next bucket to hand over
}

// overlapResult is a step's outcome: when each AllReduce call ran, and the
// first error (the buckets after an error are not reduced: the job ends).
type overlapResult struct {
	spans [][2]time.Time
	err   error
}

func newOverlapper(ar *collectives.Allreducer, tr trace.Tracer, plan []bucket) *overlapper {
	o := &overlapper{ar: ar, tr: tr, plan: plan,
		jobs: make(chan []float32, len(plan)+1), res: make(chan overlapResult, 1)}
	go o.run()
	return o
}

// run is the communication goroutine: it reduces each step's buckets in
// the order they come and reports the step's outcome at its end.
func (o *overlapper) run() {
	spans := make([][2]time.Time, 0, len(o.plan))
	for {
		r := overlapResult{spans: spans[:0]}
		for i := 0; ; i++ {
			buf, ok := <-o.jobs
			if !ok {
				return
			}
			if buf == nil {
				break
			}
			if r.err != nil {
				continue
			}
			t0 := time.Now()
			sp := o.tr.Begin("allreduce").Cat(trace.Collective).Bytes(4*len(buf)).Arg("bucket", i)
			r.err = o.ar.Allreduce(buf, collectives.Sum)
			sp.Err(r.err).End()
			r.spans = append(r.spans, [2]time.Time{t0, time.Now()})
		}
		spans = r.spans
		o.res <- r
	}
}

// start begins a step whose gradient lives in grads.
func (o *overlapper) start(grads []float32) {
	o.grads, o.next = grads, 0
}

// hook is the model's GradHook: it hands over every bucket whose layers
// are all complete (everything from lo up).
func (o *overlapper) hook(_, lo, _ int) error {
	for o.next < len(o.plan) && o.plan[o.next].lo >= lo {
		b := o.plan[o.next]
		o.jobs <- o.grads[b.lo:b.hi]
		o.next++
	}
	return nil
}

// wait ends the step whose backward pass ended at backwardEnd: it waits for
// the step's AllReduce calls and says how long they took and how much of
// that ran before backwardEnd.
func (o *overlapper) wait(backwardEnd time.Time) (bucketTimes, error) {
	left := len(o.plan) - o.next
	o.jobs <- nil
	r := <-o.res
	var t bucketTimes
	for _, s := range r.spans {
		t.busy += s[1].Sub(s[0])
		end := s[1]
		if backwardEnd.Before(end) {
			end = backwardEnd
		}
		if end.After(s[0]) {
			t.hidden += end.Sub(s[0])
		}
	}
	if r.err == nil && left > 0 {
		// Only a backward pass that failed leaves buckets behind, and then
		// Exchange does not wait: reaching here is a bug in the hook.
		r.err = fmt.Errorf("internal error: %d of %d gradient buckets were never handed over", left, len(o.plan))
	}
	return t, r.err
}

// close stops the goroutine once it finishes what it was given.
func (o *overlapper) close() { close(o.jobs) }
