package ps

import (
	"encoding/binary"
	"fmt"
	"github.com/dml-project/dml/internal/half"
	"math"
	"time"
	"unsafe"

	"github.com/dml-project/dml/kernels/optim"
)

// Decoding of the messages described in wire.go.

// reader consumes a byte slice; the first failure sticks in err.
type reader struct {
	b   []byte
	err error
	// maxKeys bounds the keys of a runs block (which may stand for more
	// keys than it has bytes).
	maxKeys int
	ranRuns bool // the keys read were a runs block
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrBadMessage}, args...)...)
	}
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail("%s: need %d bytes, have %d", what, n, len(r.b))
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8(what string) uint8 {
	if b := r.take(1, what); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u32(what string) uint32 {
	if b := r.take(4, what); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64(what string) uint64 {
	if b := r.take(8, what); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *reader) f32(what string) float32 { return math.Float32frombits(r.u32(what)) }

// keys decodes n delta-coded keys into buf's storage (grown if too
// small). A runs block may stand for more keys than it has bytes: n is
// then bounded by r.maxKeys (the keys a server holds).
func (r *reader) keys(n int, buf []int64) []int64 {
	if r.err != nil {
		return nil
	}
	form := r.u8("key form")
	if r.err != nil {
		return nil
	}
	switch {
	case form == keysRuns && n > r.maxKeys:
		r.fail("%d keys, more than the %d there are", n, r.maxKeys)
		return nil
	case form != keysRuns && n > len(r.b): // every key takes at least one byte
		r.fail("%d keys in %d bytes", n, len(r.b))
		return nil
	case form == keysU16 && 2*n > len(r.b):
		r.fail("%d keys of two bytes in %d bytes", n, len(r.b))
		return nil
	}
	var keys []int64
	if cap(buf) >= n {
		keys = buf[:n]
	} else {
		keys = make([]int64, n)
	}
	if form == keysRuns {
		r.ranRuns = true
		return r.runs(keys)
	}
	prev := int64(-1)
	follow := 0 // gaps of 0 (notRuns)
	switch form {
	case keysU16:
		// No key can overflow: at most 2^32 keys, each at most 2^16 on.
		g := r.b[:2*n]
		for i := range keys {
			d := uint64(binary.LittleEndian.Uint16(g[2*i:]))
			follow += follows(d)
			prev += int64(d) + 1
			keys[i] = prev
		}
		r.b = r.b[2*n:]
		return r.notRuns(keys, follow, 2*n)
	case keysVarint:
	default:
		r.fail("unknown key form %d", form)
		return nil
	}
	b := r.b // a local copy: no write barrier per key
	defer func() { r.b = b }()
	wide := false // some gap needs the varint form (else it is not canonical)
	size := len(b)
	for i := range keys {
		d, m := binary.Uvarint(b)
		if m <= 0 || (m > 1 && b[m-1] == 0) {
			r.fail("key %d: bad or non-minimal varint", i)
			return nil
		}
		b = b[m:]
		if d > uint64(math.MaxInt64-prev-1) {
			r.fail("key %d overflows", i)
			return nil
		}
		wide = wide || d >= 1<<16
		follow += follows(d)
		prev += int64(d) + 1
		keys[i] = prev
	}
	if !wide {
		r.fail("keys as varints where every gap fits two bytes (not the canonical form)")
		return nil
	}
	return r.notRuns(keys, follow, size-len(b))
}

// notRuns is keys, read as gaps of size bytes of which follow are 0,
// unless they go as runs (asRuns: then the gaps are not the canonical
// form).
func (r *reader) notRuns(keys []int64, follow, size int) []int64 {
	if asRuns(keys, follow, size) {
		r.fail("keys as gaps where runs are shorter and most keys follow the one before (not the canonical form)")
		return nil
	}
	return keys
}

// runs decodes a keysRuns block into keys (all of them): maximal runs
// that together hold len(keys) keys, in the form appendKeys chooses.
func (r *reader) runs(keys []int64) []int64 {
	b := r.b
	defer func() { r.b = b }()
	uv := func(what string, i int) (uint64, bool) {
		d, m := binary.Uvarint(b)
		if m <= 0 || (m > 1 && b[m-1] == 0) {
			r.fail("run %d: bad or non-minimal varint (%s)", i, what)
			return 0, false
		}
		b = b[m:]
		return d, true
	}
	runs, ok := uv("count", 0)
	if !ok {
		return nil
	}
	if runs > uint64(len(keys)) || runs > uint64(len(b))/2 { // two bytes at least per run
		r.fail("%d runs for %d keys in %d bytes", runs, len(keys), len(b))
		return nil
	}
	next, at := uint64(0), 0 // the key after the last run; keys filled
	// What the keys would take as gaps (varints, or two bytes each where
	// no gap is wide), and how many gaps are 0: for the canonical form.
	varints, wide, follow := 0, false, 0
	size := len(b) + uvarintLen(runs)
	for i := range int(runs) {
		gap, ok := uv("gap", i)
		if !ok {
			return nil
		}
		l, ok := uv("length", i)
		if !ok {
			return nil
		}
		switch {
		case i > 0 && gap == 0:
			r.fail("run %d follows run %d without a gap (runs are maximal)", i, i-1)
			return nil
		case l >= uint64(len(keys)-at):
			r.fail("run %d of %d keys: more than the %d announced", i, l+1, len(keys))
			return nil
		case next > math.MaxInt64 || gap > math.MaxInt64-next || l > math.MaxInt64-next-gap:
			// The run's first key, next + gap, or its last, + l, is
			// past the largest key (next itself may be one past it,
			// after a run that ends there).
			r.fail("run %d overflows", i)
			return nil
		}
		k := int64(next + gap)
		for j := range int(l) + 1 {
			keys[at+j] = k + int64(j)
		}
		varints += uvarintLen(gap) + int(l)
		wide = wide || gap >= 1<<16
		follow += int(l) + follows(gap)
		at += int(l) + 1
		next = uint64(k) + l + 1
	}
	if at != len(keys) {
		r.fail("runs hold %d keys, %d announced", at, len(keys))
		return nil
	}
	gaps := 2 * len(keys)
	if wide {
		gaps = varints
	}
	if !runsShorter(len(keys), follow, gaps, size-len(b)) {
		r.fail("keys as runs where their gaps are no longer, or most keys start a run (not the canonical form)")
		return nil
	}
	return keys
}

// values takes n values of encoding enc, still encoded; none when they
// follow apart (float32 only).
func (r *reader) values(n int, enc Encoding, apart bool) []byte {
	w := enc.width()
	if w == 0 {
		r.fail("unknown value encoding %d", uint8(enc))
		return nil
	}
	if apart {
		if enc != Float32 {
			r.fail("%v values cannot follow apart", enc)
		}
		return nil
	}
	if r.err == nil && n > len(r.b)/w {
		r.fail("%d values of %v in %d bytes", n, enc, len(r.b))
		return nil
	}
	return r.take(n*w, "values")
}

// pad checks the two zero bytes that align a push's values.
func (r *reader) pad() {
	if p := r.take(2, "padding"); p != nil && (p[0] != 0 || p[1] != 0) {
		r.fail("non-zero padding")
	}
}

// decode parses one message. The values stay encoded in m.raw (aliasing b);
// use m.floats or m.floatsInto to get them. Its keys, as runs, are at
// most decodeMaxKeys.
func decode(b []byte) (m message, err error) { return decodeInto(b, nil, decodeMaxKeys) }

// decodeMaxKeys bounds the keys decode takes as runs (tests decode a
// few; a worker decodes replies, which carry none, with a bound of 0).
const decodeMaxKeys = 1 << 16

// decodeInto is decode with keys decoded into keyBuf's storage when it is
// large enough (no allocation), and at most maxKeys keys as runs (a
// server's: the keys of its range).
func decodeInto(b []byte, keyBuf []int64, maxKeys int) (m message, err error) {
	if len(b) == 0 {
		return message{}, fmt.Errorf("%w: empty message", ErrBadMessage)
	}
	r := &reader{b: b, maxKeys: maxKeys}
	k := r.u8("kind")
	m.kind = msgKind(k & kindMask)
	m.valuesFollow, m.replyApart = k&flagValuesFollow != 0, k&flagReplyApart != 0
	switch m.kind {
	case kindHello:
		h := &m.hello
		h.version = r.u8("version")
		h.p = r.u64("P")
		h.servers = r.u32("servers")
		h.consistency = Consistency(r.u8("consistency"))
		h.optimizer = optim.Kind(r.u8("optimizer"))
		h.staleness = r.u32("staleness")
		h.low = r.u32("low")
		h.high = r.u32("high")
		h.lr, h.momentum, h.wd, h.eps32 = r.f32("lr"), r.f32("momentum"), r.f32("wd"), r.f32("eps")
	case kindPullRange:
		m.clock = r.u32("clock")
		m.lo, m.hi = int64(r.u64("lo")), int64(r.u64("hi"))
	case kindPullKeys:
		m.clock = r.u32("clock")
		m.n = int(r.u32("n"))
		m.keys = r.keys(m.n, keyBuf)
		m.runs = r.ranRuns
	case kindPushRange, kindPushPull:
		m.enc = Encoding(r.u8("encoding"))
		r.pad()
		m.clock = r.u32("clock")
		m.lo = int64(r.u64("lo"))
		m.n = int(r.u32("n"))
		m.raw = r.values(m.n, m.enc, m.valuesFollow)
		m.hi = m.lo + int64(m.n)
	case kindPushKeys, kindPushPullK:
		m.enc = Encoding(r.u8("encoding"))
		r.pad()
		m.clock = r.u32("clock")
		m.n = int(r.u32("n"))
		m.raw = r.values(m.n, m.enc, m.valuesFollow)
		m.keys = r.keys(m.n, keyBuf)
		m.runs = r.ranRuns
	case kindDone, kindSnapshot:
		m.clock = r.u32("clock")
	case kindOK:
		m.held = time.Duration(r.u64("held"))
	case kindValues:
		m.staleness = r.u32("staleness")
		m.held = time.Duration(r.u64("held"))
		m.n = int(r.u32("n"))
		m.enc = Float32
		m.raw = r.values(m.n, Float32, m.valuesFollow)
	case kindError:
		m.code = r.u8("code")
		n := int(r.u32("length"))
		m.text = string(r.take(n, "text"))
	case kindWait:
	default:
		return message{}, fmt.Errorf("%w: unknown message kind %d", ErrBadMessage, k)
	}
	switch {
	case m.valuesFollow && m.kind != kindPushRange && m.kind != kindPushKeys && m.kind != kindPushPull &&
		m.kind != kindPushPullK && m.kind != kindValues:
		return message{}, fmt.Errorf("%w: %v cannot have values apart", ErrBadMessage, m.kind)
	case m.replyApart && m.kind != kindPullRange && m.kind != kindPullKeys && m.kind != kindPushPull && m.kind != kindPushPullK:
		return message{}, fmt.Errorf("%w: %v has no values reply", ErrBadMessage, m.kind)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%v: %d trailing bytes", m.kind, len(r.b))
	}
	if r.err != nil {
		return message{}, fmt.Errorf("%v message of %d bytes: %w", m.kind, len(b), r.err)
	}
	return m, nil
}

// numValues is how many values m carries (0 for kinds without values).
func (m *message) numValues() int {
	if w := m.enc.width(); w > 0 {
		return len(m.raw) / w
	}
	return 0
}

// floatsInto decodes m's values into dst[:m.numValues()].
func (m *message) floatsInto(dst []float32) {
	dst = dst[:m.numValues()]
	raw := m.raw
	switch m.enc {
	case Float32:
		if littleEndian {
			copy(float32Bytes(dst), raw)
			return
		}
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case Float16, BFloat16:
		raw = raw[:2*len(dst)]
		if littleEndian && len(dst) > 0 && uintptr(unsafe.Pointer(&raw[0]))%2 == 0 {
			u := unsafe.Slice((*uint16)(unsafe.Pointer(&raw[0])), len(dst))
			if m.enc == Float16 {
				for i, h := range u {
					dst[i] = half.Float16ToFloat32(h)
				}
			} else {
				for i, h := range u {
					dst[i] = half.BFloat16ToFloat32(h)
				}
			}
			return
		}
		for i := range dst {
			h := binary.LittleEndian.Uint16(raw[2*i:])
			if m.enc == Float16 {
				dst[i] = half.Float16ToFloat32(h)
			} else {
				dst[i] = half.BFloat16ToFloat32(h)
			}
		}
	}
}

// viewed reports whether vs is a view of m's bytes (floatsView in place).
func (m *message) viewed(vs []float32) bool {
	return len(vs) > 0 && len(m.raw) > 0 && unsafe.Pointer(&vs[0]) == unsafe.Pointer(&m.raw[0])
}

// floats decodes m's values into a new slice.
func (m *message) floats() []float32 { return m.floatsView(nil) }

// floatsView returns m's values: float32 values on a little-endian machine
// are viewed in place in the message when they are 4-byte aligned (no
// copy); otherwise they are decoded into buf's storage (grown if needed).
func (m *message) floatsView(buf []float32) []float32 {
	n := m.numValues()
	if m.enc == Float32 && littleEndian && n > 0 && uintptr(unsafe.Pointer(&m.raw[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&m.raw[0])), n)
	}
	if cap(buf) < n {
		buf = make([]float32, n)
	}
	buf = buf[:n]
	m.floatsInto(buf)
	return buf
}
