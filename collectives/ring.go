package collectives

import "fmt"

// Ring AllReduce: a reduce-scatter followed by an all-gather, each n−1 steps
// around the ring 0 → 1 → … → n−1 → 0. The buffer is cut into n chunks
// (Chunks); here n = 3, chunks a, b, c, and x_r is rank r's copy of x:
//
//	              rank 0          rank 1          rank 2
//	start         a0 b0 c0        a1 b1 c1        a2 b2 c2
//	RS step 0     0 sends a0 →1   1 sends b1 →2   2 sends c2 →0
//	              c += c2         a += a0         b += b1
//	RS step 1     0 sends c →1    1 sends a →2    2 sends b →0
//	              b = Σb  ✔       c = Σc  ✔       a = Σa  ✔
//	AG step 0     0 sends Σb →1   1 sends Σc →2   2 sends Σa →0
//	AG step 1     0 sends Σa →1   1 sends Σb →2   2 sends Σc →0
//	end           Σa Σb Σc on every rank
//
// Rank r sends chunk (r−s) and receives chunk (r−s−1) at reduce-scatter step
// s; it sends chunk (r+1−t) and receives chunk (r−t) at all-gather step t
// (RingSchedule). Every rank sends and receives 2(n−1)/n of the buffer, which
// is optimal for bandwidth: for B bytes over links of bandwidth β the time is
// about 2(n−1)/n · B/β + 2(n−1)·α, α the per-message latency. Bus bandwidth
// (busbw = algbw · 2(n−1)/n) measures how close a run gets to β.
//
// Pipelining: each chunk travels as segments of at most SegmentBytes. A
// segment received at reduce-scatter step s is added into the buffer and
// sent on at once as part of step s+1, so the next rank can work on it while
// this one handles the following segment. A segment's final sum goes out at
// once as all-gather step 0, and each all-gather segment is forwarded as soon
// as it lands: the two phases overlap, one segment apart (RingPipeline gives
// the order in which a rank handles what it receives). Each rank's sums
// happen in one fixed order per chunk, so every rank ends with bitwise
// identical results.
//
// Buffers: sends go straight from the caller's buffer (no staging copy). The
// reduce-scatter keeps at most Window receives in flight, each into its own
// segment-sized scratch slot (persistent in the Allreducer), so a segment is
// added while it is still in cache. An all-gather segment is received
// straight into the caller's buffer, posted only when the rank gets to it
// (over shared memory the receiver does the copy, so posting earlier gains
// nothing) and only after this rank's send from that place has completed.
//
// Measured (dml bench allreduce, 2 and 4 ranks on a 2-core VM, OpenMPI
// vader/CMA, ring and MPI_Allreduce interleaved, runs repeated): 256 KiB
// segments with 4 slots beat 64 and 128 KiB (per-message handshakes), while
// chunks up to 1 MiB went faster whole (WholeChunkBytes: 1 MiB at 2 ranks
// from about 0.95× to 1.0-1.05× MPI). At 2 ranks, overlapping the
// all-gather with the reduce-scatter took 4 MiB from about 0.9× to 1.1-1.2×
// MPI: the neighbour copies each reduced segment while it is still in cache.
// The other large term was not the algorithm but the Go runtime waking a
// thread on the rank's only core during long MPI waits (see mpi.Init on
// GOMAXPROCS). At 4 ranks on 2 cores the ring pays 2(n−1) dependent hops,
// each of which may wait for a descheduled neighbour, and stays at about
// 0.9× MPI at 1 MiB.

// DefaultSegmentBytes is the ring's default pipelining unit for chunks
// larger than WholeChunkBytes.
const DefaultSegmentBytes = 256 << 10

// WholeChunkBytes: with the default segment size, a chunk (1/n of the
// buffer) up to this size travels whole, one message per step. It fits in
// cache as it is, and fewer messages save their handshakes.
const WholeChunkBytes = 1 << 20

// DefaultWindow is the default number of reduce-scatter receives in flight.
const DefaultWindow = 4

// maxWindow bounds Allreducer.Window (the scratch slots it keeps).
const maxWindow = 8

// ring runs the ring AllReduce on buf, in place. With a 16-bit Wire the
// ring runs on the packed words (wireBuf) instead of buf: its chunks and
// segments are spans of words, and wb's hooks convert between the two
// where values are added, sent and received.
func (a *Allreducer) ring(buf []float32, op Op) error {
	c := a.Comm
	n, r := c.Size(), c.Rank()
	if n == 1 {
		return nil
	}
	x := &ringRun{a: a, c: c, n: n, buf: buf, words: buf, avg: op == Avg, inv: float32(1) / float32(n),
		left: (r - 1 + n) % n, right: (r + 1) % n}
	if a.Wire != WireF32 {
		x.wb = a.wireBuf(buf)
		x.words = x.wb.pk
	}
	chunks := Chunks(len(x.words), n)
	rs, _ := RingSchedule(r, n)
	seg := a.segmentElems(chunks[0].Len)
	x.p = a.ringPlan(r, n, len(x.words), seg)
	x.window = a.window()
	slot := min(seg, chunks[0].Len) // chunk 0 is the largest
	for i := range a.scratch[:x.window] {
		if cap(a.scratch[i]) < slot {
			a.scratch[i] = make([]float32, slot)
		}
	}
	x.agSends = x.p.agSends[:0]
	defer x.drop()
	if err := x.start(chunks[rs[0].Send], seg); err != nil {
		return err
	}
	k := 0 // reduce-scatter receives handled
	for _, it := range x.p.order {
		var err error
		if it.AllGather {
			err = x.gather(it)
		} else {
			err = x.reduce(it, k)
			k++
		}
		if err != nil {
			return err
		}
	}
	if err := waitAll(x.p.rsSends); err != nil {
		return fmt.Errorf("ring reduce-scatter: send to rank %d: %w", x.right, err)
	}
	if err := waitAll(x.agSends); err != nil {
		return fmt.Errorf("ring all-gather: send to rank %d: %w", x.right, err)
	}
	return nil
}

// ringRun is one ring AllReduce in progress: its buffers, its plan's
// request slots and its neighbours.
type ringRun struct {
	a           *Allreducer
	c           PointToPoint
	n           int
	buf, words  []float32 // the caller's values; what travels (buf, or wb's packed words)
	wb          *wireBuf  // nil at WireF32
	avg         bool
	inv         float32 // 1/n, for Avg
	left, right int
	p           *ringPlan
	window      int
	agSends     []Request
}

// drop forgets the finished requests, keeping the slices for the next run.
func (x *ringRun) drop() {
	clear(x.p.recvs)
	clear(x.p.rsSends)
	clear(x.agSends)
	x.p.agSends = x.agSends[:0]
}

// post posts the reduce-scatter receive k (if there is one) into its
// scratch slot.
func (x *ringRun) post(k int) error {
	if k >= len(x.p.rsIdx) {
		return nil
	}
	it := x.p.order[x.p.rsIdx[k]]
	q, err := x.c.Irecv(x.a.scratch[k%x.window][:it.Span.Len], x.left, tagRingRS+x.a.tagOff)
	if err != nil {
		return fmt.Errorf("ring reduce-scatter step %d: recv from rank %d: %w", it.Step, x.left, err)
	}
	x.p.recvs[k] = q
	return nil
}

// send sends segment sg of the travelling words to the right neighbour.
func (x *ringRun) send(phase string, step int, sg Span, tag int) (Request, error) {
	x.a.Sent += 4 * int64(sg.Len)
	q, err := x.c.Isend(x.words[sg.Off:sg.Off+sg.Len], x.right, tag+x.a.tagOff)
	if err != nil {
		return nil, fmt.Errorf("ring %s step %d: send to rank %d: %w", phase, step, x.right, err)
	}
	return q, nil
}

// start posts the first Window receives and sends reduce-scatter step
// 0's chunk, segment by segment.
func (x *ringRun) start(first Span, seg int) error {
	for k := 0; k < x.window; k++ {
		if err := x.post(k); err != nil {
			return err
		}
	}
	for j, sg := range Segments(first, seg) {
		if x.wb != nil {
			x.wb.out(sg)
		}
		q, err := x.send("reduce-scatter", 0, sg, tagRingRS)
		if err != nil {
			return err
		}
		x.p.rsSends[j] = q
	}
	return nil
}

// reduce handles reduce-scatter receive k (it): adds it in, posts the
// receive Window further, and sends the partial sum on (the final sum,
// averaged for Avg, as all-gather step 0).
func (x *ringRun) reduce(it RingRecv, k int) error {
	sg := it.Span
	if err := x.p.recvs[k].Wait(); err != nil {
		return fmt.Errorf("ring reduce-scatter step %d: recv from rank %d: %w", it.Step, x.left, err)
	}
	in := x.a.scratch[k%x.window][:sg.Len]
	if x.wb != nil {
		x.wb.add(sg, in)
	} else {
		addInto(x.buf[sg.Off:sg.Off+sg.Len], in)
	}
	if err := x.post(k + x.window); err != nil {
		return err
	}
	if it.Step == x.n-2 {
		if x.wb != nil {
			x.wb.final(sg, x.avg, x.inv)
		} else if x.avg {
			scale(x.buf[sg.Off:sg.Off+sg.Len], x.inv)
		}
		q, err := x.send("all-gather", 0, sg, tagRingAG)
		if err != nil {
			return err
		}
		x.agSends = append(x.agSends, q)
		return nil
	}
	if x.wb != nil {
		x.wb.out(sg)
	}
	q, err := x.send("reduce-scatter", it.Step+1, sg, tagRingRS)
	if err != nil {
		return err
	}
	x.p.rsSends[(it.Step+1)*x.p.nseg+it.Seg] = q
	return nil
}

// gather handles an all-gather receive (it): the segment lands where this
// rank sent its partial sum at reduce-scatter step it.Step, so that send
// must be done; then it is forwarded unless this is the last step.
func (x *ringRun) gather(it RingRecv) error {
	sg := it.Span
	if q := x.p.rsSends[it.Step*x.p.nseg+it.Seg]; q != nil {
		if err := q.Wait(); err != nil {
			return fmt.Errorf("ring reduce-scatter step %d: send to rank %d: %w", it.Step, x.right, err)
		}
	}
	q, err := x.c.Irecv(x.words[sg.Off:sg.Off+sg.Len], x.left, tagRingAG+x.a.tagOff)
	if err == nil {
		err = q.Wait()
	}
	if err != nil {
		return fmt.Errorf("ring all-gather step %d: recv from rank %d: %w", it.Step, x.left, err)
	}
	if x.wb != nil {
		x.wb.back(sg)
	}
	if it.Step+1 < x.n-1 {
		q, err := x.send("all-gather", it.Step+1, sg, tagRingAG)
		if err != nil {
			return err
		}
		x.agSends = append(x.agSends, q)
	}
	return nil
}

// ringPlan is what the ring computes once per (rank, size, length, segment):
// the order of receives and the request slots, reused while they match.
type ringPlan struct {
	rank, n, length, seg int
	order                []RingRecv
	rsIdx                []int // indexes in order of the reduce-scatter receives
	nseg                 int   // segments in the largest chunk
	recvs                []Request
	// rsSends[s*nseg+j] is the send of segment j at reduce-scatter step s:
	// the all-gather receive into that segment waits for it.
	rsSends []Request
	agSends []Request
}

func (a *Allreducer) ringPlan(rank, n, length, seg int) *ringPlan {
	if p := a.plan; p != nil && p.rank == rank && p.n == n && p.length == length && p.seg == seg {
		return p
	}
	p := &ringPlan{rank: rank, n: n, length: length, seg: seg}
	p.order = RingPipeline(rank, n, length, seg)
	for i, it := range p.order {
		if !it.AllGather {
			p.rsIdx = append(p.rsIdx, i)
		}
	}
	p.nseg = len(Segments(Chunks(length, n)[0], seg))
	p.recvs = make([]Request, len(p.rsIdx))
	p.rsSends = make([]Request, (n-1)*p.nseg)
	a.plan = p
	return p
}

func (a *Allreducer) window() int {
	if a.Window > 0 {
		return min(a.Window, maxWindow)
	}
	return DefaultWindow
}

// segmentElems is the segment length for chunks of at most chunk elements.
func (a *Allreducer) segmentElems(chunk int) int {
	b := a.SegmentBytes
	if b <= 0 {
		b = DefaultSegmentBytes
		if 4*chunk <= WholeChunkBytes {
			b = 4 * chunk
		}
	}
	return max(1, b/4)
}

// waitAll waits for every request and returns the first error.
func waitAll(reqs []Request) error {
	var first error
	for _, q := range reqs {
		if q == nil {
			continue
		}
		if err := q.Wait(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
