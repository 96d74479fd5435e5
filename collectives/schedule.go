package collectives

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
