package allreduce

import (
	"fmt"
	"time"

	"github.com/dml-project/dml/trainer/engine"
	"github.com/dml-project/dml/trainer/model"
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

// overlapper AllReduces a step's buckets on a goroutine of its own while
// the backward pass goes on: the gradient hook hands it each bucket as the
// bucket's lowest layer completes, and the step's goroutine collects each
// bucket's outcome in order (bucketDone), so that it can update the weights
// of one bucket while the goroutine still reduces the next. Only that
// goroutine calls the Allreducer (and so the transport) during a step; the
// Comm is used by one goroutine at a time, as MPI's THREAD_SERIALIZED level
// asks, and the backend only by the step's goroutine.
//
// The buckets are disjoint pieces of the gradient buffer; the backward pass
// writes only the pieces of layers not yet handed over, and the update
// reads only pieces already reduced, so the two goroutines never touch the
// same memory at once.
type overlapper struct {
	// reduce sums bucket i (buf) over the ranks (allreduceStrategy.reduceBucket)
	reduce func(i int, buf []float32) error
	plan   []bucket
	jobs   chan bucketJob  // a bucket to reduce
	done   chan bucketDone // one per bucket, in order

	// Used by the step's goroutine only.
	grads []float32 // the gradient (and stats), host memory
	next  int       // plan[next] is the next bucket to hand over
}

// bucketJob is bucket i of a step, to reduce in place.
type bucketJob struct {
	i   int
	buf []float32
}

// bucketDone is one bucket's outcome: when its AllReduce ran, and its error
// (after an error the later buckets are not reduced: the job ends).
type bucketDone struct {
	t0, t1 time.Time
	err    error
}

func newOverlapper(reduce func(i int, buf []float32) error, plan []bucket) *overlapper {
	o := &overlapper{reduce: reduce, plan: plan,
		jobs: make(chan bucketJob, len(plan)), done: make(chan bucketDone, len(plan))}
	go o.run()
	return o
}

// run is the communication goroutine: it reduces the buckets in the order
// they come, until close.
func (o *overlapper) run() {
	var failed error
	for job := range o.jobs {
		if failed != nil {
			o.done <- bucketDone{err: failed}
			continue
		}
		t0 := time.Now()
		failed = engine.Caught(func() error { return o.reduce(job.i, job.buf) })
		o.done <- bucketDone{t0: t0, t1: time.Now(), err: failed}
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
		o.jobs <- bucketJob{i: o.next, buf: o.grads[b.lo:b.hi]}
		o.next++
	}
	return nil
}

// wait returns the outcome of the next bucket, in the plan's order (call
// it once per bucket, after the backward pass returned).
func (o *overlapper) wait() (bucketDone, error) {
	if o.next != len(o.plan) {
		// Only a backward pass that failed leaves buckets behind, and then
		// Exchange does not wait: reaching here is a bug in the hook.
		return bucketDone{}, fmt.Errorf("internal error: %d of %d gradient buckets were never handed over", len(o.plan)-o.next, len(o.plan))
	}
	d := <-o.done
	return d, d.err
}

// hiddenPart is the part of [t0, t1] before end: the AllReduce time that
// ran while the backward pass (which ended at end) was still running.
func hiddenPart(t0, t1, end time.Time) time.Duration {
	if end.Before(t1) {
		t1 = end
	}
	if t1.After(t0) {
		return t1.Sub(t0)
	}
	return 0
}

// close stops the goroutine once it finishes what it was given.
func (o *overlapper) close() { close(o.jobs) }
