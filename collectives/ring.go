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
// Pipelining: each chunk travels as segments of at most SegmentElems. A
// segment received at reduce-scatter step s is added into the buffer and
// sent on at once as part of step s+1, so links and the adder work at the
// same time; receives for the next step are posted before this step's are
// waited on. Each rank's sums happen in one fixed order per chunk, so every
// rank ends with bitwise identical results.
//
// Buffers: sends go straight from the caller's buffer (no staging copy); the
// reduce-scatter receives into two persistent scratch chunks that alternate
// by step, and the all-gather receives straight into the caller's buffer.

// DefaultSegmentBytes is the ring's default pipelining unit.
const DefaultSegmentBytes = 1 << 20

// ring runs the ring AllReduce on buf, in place.
func (a *Allreducer) ring(buf []float32, op Op) error {
	c := a.Comm
	n, r := c.Size(), c.Rank()
	if n == 1 {
		return nil
	}
	left, right := (r-1+n)%n, (r+1)%n
	chunks := Chunks(len(buf), n)
	rs, ag := RingSchedule(r, n)
	seg := a.segmentElems()

	maxChunk := chunks[0].Len
	for i := range a.scratch {
		if cap(a.scratch[i]) < maxChunk {
			a.scratch[i] = make([]float32, maxChunk)
		}
	}

	// Reduce-scatter. recvs[s] holds the posted receives of step s.
	recvs := make([][]Request, len(rs))
	post := func(s int) error {
		if s >= len(rs) {
			return nil
		}
		ch := chunks[rs[s].Recv]
		tmp := a.scratch[s%2]
		for _, sg := range Segments(ch, seg) {
			q, err := c.Irecv(tmp[sg.Off-ch.Off:sg.Off-ch.Off+sg.Len], left, tagRingRS)
			if err != nil {
				return fmt.Errorf("ring reduce-scatter step %d: recv from rank %d: %w", s, left, err)
			}
			recvs[s] = append(recvs[s], q)
		}
		return nil
	}
	var sends []Request
	send := func(phase string, step int, sg Span, tag int) error {
		q, err := c.Isend(buf[sg.Off:sg.Off+sg.Len], right, tag)
		if err != nil {
			return fmt.Errorf("ring %s step %d: send to rank %d: %w", phase, step, right, err)
		}
		sends = append(sends, q)
		return nil
	}
	if err := post(0); err != nil {
		return err
	}
	if err := post(1); err != nil {
		return err
	}
	for _, sg := range Segments(chunks[rs[0].Send], seg) {
		if err := send("reduce-scatter", 0, sg, tagRingRS); err != nil {
			return err
		}
	}
	inv := float32(1) / float32(n)
	for s, st := range rs {
		ch := chunks[st.Recv]
		tmp := a.scratch[s%2]
		last := s == len(rs)-1
		for j, sg := range Segments(ch, seg) {
			if err := recvs[s][j].Wait(); err != nil {
				return fmt.Errorf("ring reduce-scatter step %d: recv chunk %d from rank %d: %w", s, st.Recv, left, err)
			}
			addInto(buf[sg.Off:sg.Off+sg.Len], tmp[sg.Off-ch.Off:sg.Off-ch.Off+sg.Len])
			if last {
				if op == Avg {
					scale(buf[sg.Off:sg.Off+sg.Len], inv)
				}
				continue // sent by the all-gather below
			}
			if err := send("reduce-scatter", s+1, sg, tagRingRS); err != nil {
				return err
			}
		}
		// This step's scratch is free again: post the receives of step s+2.
		if err := post(s + 2); err != nil {
			return err
		}
	}
	// The all-gather overwrites chunks this rank sent during the
	// reduce-scatter: those sends must be complete first.
	if err := waitAll(sends); err != nil {
		return fmt.Errorf("ring reduce-scatter: send to rank %d: %w", right, err)
	}
	sends = sends[:0]

	// All-gather: every receive lands in its final place, so all can be
	// posted now (in step order, which is the order they will arrive).
	agRecvs := make([][]Request, len(ag))
	for t, st := range ag {
		for _, sg := range Segments(chunks[st.Recv], seg) {
			q, err := c.Irecv(buf[sg.Off:sg.Off+sg.Len], left, tagRingAG)
			if err != nil {
				return fmt.Errorf("ring all-gather step %d: recv from rank %d: %w", t, left, err)
			}
			agRecvs[t] = append(agRecvs[t], q)
		}
	}
	for _, sg := range Segments(chunks[ag[0].Send], seg) {
		if err := send("all-gather", 0, sg, tagRingAG); err != nil {
			return err
		}
	}
	for t, st := range ag {
		for j, sg := range Segments(chunks[st.Recv], seg) {
			if err := agRecvs[t][j].Wait(); err != nil {
				return fmt.Errorf("ring all-gather step %d: recv chunk %d from rank %d: %w", t, st.Recv, left, err)
			}
			if t+1 < len(ag) {
				if err := send("all-gather", t+1, sg, tagRingAG); err != nil {
					return err
				}
			}
		}
	}
	if err := waitAll(sends); err != nil {
		return fmt.Errorf("ring all-gather: send to rank %d: %w", right, err)
	}
	return nil
}

func (a *Allreducer) segmentElems() int {
	b := a.SegmentBytes
	if b <= 0 {
		b = DefaultSegmentBytes
	}
	return max(1, b/4)
}

// waitAll waits for every request and returns the first error.
func waitAll(reqs []Request) error {
	var first error
	for _, q := range reqs {
		if err := q.Wait(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
