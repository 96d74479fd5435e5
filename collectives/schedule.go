package collectives

import (
	"cmp"
	"slices"
)

// Span is a half-open range [Off, Off+Len) of a buffer.
type Span struct{ Off, Len int }

// Chunks splits length elements into n contiguous chunks as evenly as
// possible: the first length%n chunks get one element more. Chunks may be
// empty when length < n.
func Chunks(length, n int) []Span {
	out := make([]Span, n)
	base, extra := length/n, length%n
	off := 0
	for i := range out {
		l := base
		if i < extra {
			l++
		}
		out[i] = Span{off, l}
		off += l
	}
	return out
}

// Segments splits a span into pieces of at most seg elements (the last one
// shorter): the pipelining unit of the ring. An empty span has no segments.
func Segments(s Span, seg int) []Span {
	if s.Len == 0 {
		return nil
	}
	if seg <= 0 {
		seg = s.Len
	}
	out := make([]Span, 0, (s.Len+seg-1)/seg)
	for off := 0; off < s.Len; off += seg {
		l := min(seg, s.Len-off)
		out = append(out, Span{s.Off + off, l})
	}
	return out
}

// RingStep is what one rank does in one step of the ring: send chunk Send to
// the right neighbour and receive chunk Recv from the left one.
type RingStep struct{ Send, Recv int }

// RingSchedule returns, for rank of n, the n−1 reduce-scatter steps and the
// n−1 all-gather steps of the ring AllReduce (see ring.go for the picture).
// After the reduce-scatter, rank r holds the fully reduced chunk (r+1) mod n.
func RingSchedule(rank, n int) (reduceScatter, allGather []RingStep) {
	mod := func(x int) int { return ((x % n) + n) % n }
	for s := 0; s < n-1; s++ {
		reduceScatter = append(reduceScatter, RingStep{Send: mod(rank - s), Recv: mod(rank - s - 1)})
	}
	for t := 0; t < n-1; t++ {
		allGather = append(allGather, RingStep{Send: mod(rank + 1 - t), Recv: mod(rank - t)})
	}
	return reduceScatter, allGather
}

// RingRecv is one segment a rank receives from its left neighbour during the
// pipelined ring (RingPipeline): in the reduce-scatter when AllGather is
// false (it is added into Span), in the all-gather otherwise (it lands in
// Span). Step is the step within its phase and Seg the segment's index
// within its chunk.
type RingRecv struct {
	AllGather bool
	Step, Seg int
	Span      Span
}

// RingPipeline returns, for rank of n ranks and a buffer of length elements
// cut into segments of at most seg elements, every segment the rank receives
// in the order it handles them. Sends need no list: a rank sends every
// segment of its RingSchedule reduce-scatter step 0 first, then each segment
// it handles moves on to the right neighbour at once (to the next step of
// its phase, or, from the last reduce-scatter step, to all-gather step 0),
// except from the last all-gather step.
//
// The order interleaves the phases. Reduce-scatter segment (s, j) has
// virtual time s·S + j (S = segments of the largest chunk); all-gather
// segment (t, j) has (n−2)·S + j + t + 1, one more than the segment it is
// forwarded from, so that a segment's all-gather follows right behind its
// final sum through the ring. Ties go to the reduce-scatter, then to the
// lower step. Each segment comes from one the left neighbour handled at an
// earlier virtual time, so no rank waits on a later one (no deadlock), and
// the left neighbour sends each phase's segments in the order the right
// one handles them (MPI matches same-tag messages in order).
func RingPipeline(rank, n, length, seg int) []RingRecv {
	if n < 2 {
		return nil
	}
	chunks := Chunks(length, n)
	rs, ag := RingSchedule(rank, n)
	S := len(Segments(chunks[0], seg))
	type keyed struct {
		v, kind int
		r       RingRecv
	}
	var all []keyed
	for s, st := range rs {
		for j, sp := range Segments(chunks[st.Recv], seg) {
			all = append(all, keyed{s*S + j, 0, RingRecv{false, s, j, sp}})
		}
	}
	for t, st := range ag {
		for j, sp := range Segments(chunks[st.Recv], seg) {
			all = append(all, keyed{(n-2)*S + j + t + 1, 1, RingRecv{true, t, j, sp}})
		}
	}
	slices.SortStableFunc(all, func(a, b keyed) int {
		return cmp.Or(cmp.Compare(a.v, b.v), cmp.Compare(a.kind, b.kind), cmp.Compare(a.r.Step, b.r.Step))
	})
	out := make([]RingRecv, len(all))
	for i, k := range all {
		out[i] = k.r
	}
	return out
}
