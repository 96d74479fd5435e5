package collectives

// wireBuf is a ring AllReduce's buffer on a 16-bit Wire: buf, the caller's
// float32 values, and pk, the words that travel. Word k < half holds
// elements 2k and 2k+1 of buf's first m = len(buf) − ExactTail elements (the
// last word's high half is zero when m is odd); the words from half on are
// the exact tail's float32 values themselves. The ring's chunks and
// segments are spans of pk's words; the hooks below convert a span between
// the two.
type wireBuf struct {
	w          Wire
	buf, pk    []float32
	m, half    int
	scale, inv float32
}

// Words is how many float32 words n values travel as on w with the last
// exactTail of them as float32: two to a word before the tail.
func (w Wire) Words(n, exactTail int) int {
	if w == WireF32 {
		return n
	}
	tail := min(max(exactTail, 0), n)
	return (n-tail+1)/2 + tail
}

// wireBuf sets up a's wire buffer for buf (pk kept between calls).
func (a *Allreducer) wireBuf(buf []float32) *wireBuf {
	tail := min(max(a.ExactTail, 0), len(buf))
	m := len(buf) - tail
	n := a.Wire.Words(len(buf), tail)
	half := n - tail
	if cap(a.pk) < n {
		a.pk = make([]float32, n)
	}
	wb := &a.wb
	*wb = wireBuf{w: a.Wire, buf: buf, pk: a.pk[:n], m: m, half: half, scale: 1, inv: 1}
	if a.Wire == WireF16 && a.Scale != 0 {
		wb.scale, wb.inv = a.Scale, 1/a.Scale
	}
	if m%2 == 1 {
		halves(wb.pk[half-1 : half])[1] = 0
	}
	return wb
}

// elems is the packed part of word span sg as a range of buf's elements,
// and its tail part as a range of pk's words (both may be empty).
func (wb *wireBuf) elems(sg Span) (lo, hi, tlo, thi int) {
	end := sg.Off + sg.Len
	lo, hi = min(2*sg.Off, wb.m), min(2*end, wb.m)
	tlo, thi = max(sg.Off, wb.half), max(end, wb.half)
	return
}

// tail is the part of buf's exact tail that travels as pk's words
// [tlo, thi).
func (wb *wireBuf) tail(tlo, thi int) []float32 {
	return wb.buf[wb.m+tlo-wb.half : wb.m+thi-wb.half]
}

// out rounds span sg of buf into pk, to be sent.
func (wb *wireBuf) out(sg Span) {
	lo, hi, tlo, thi := wb.elems(sg)
	if lo < hi {
		encode(wb.w, halves(wb.pk)[lo:hi], wb.buf[lo:hi], wb.scale)
	}
	copy(wb.pk[tlo:thi], wb.tail(tlo, thi))
}

// add adds the received words in (span sg) into buf.
func (wb *wireBuf) add(sg Span, in []float32) {
	lo, hi, tlo, thi := wb.elems(sg)
	if lo < hi {
		decode(wb.w, wb.buf[lo:hi], halves(in)[:hi-lo], wb.inv, true)
	}
	if tlo < thi {
		addInto(wb.tail(tlo, thi), in[tlo-sg.Off:thi-sg.Off])
	}
}

// back writes pk's span sg (a received all-gather segment, or a final
// sum just rounded) into buf.
func (wb *wireBuf) back(sg Span) {
	lo, hi, tlo, thi := wb.elems(sg)
	if lo < hi {
		decode(wb.w, wb.buf[lo:hi], halves(wb.pk)[lo:hi], wb.inv, false)
	}
	copy(wb.tail(tlo, thi), wb.pk[tlo:thi])
}

// final finishes span sg's sum on the rank that owns it: the mean if avg,
// rounded to the wire, and the rounded value kept in buf too, so that
// every rank ends with the same bits.
func (wb *wireBuf) final(sg Span, avg bool, inv float32) {
	lo, hi, tlo, thi := wb.elems(sg)
	if avg {
		scale(wb.buf[lo:hi], inv)
		scale(wb.tail(tlo, thi), inv)
	}
	wb.out(sg)
	wb.back(sg)
}
