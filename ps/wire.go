package ps

import (
	"encoding/binary"
	"fmt"
	"github.com/dml-project/dml/internal/half"
	"math"
	"math/bits"
	"slices"
	"time"
	"unsafe"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels/optim"
)

// The wire format. Every message is one SendBytes on RequestTag (worker to
// server) or ReplyTag (server to worker); integers are little-endian, keys
// are delta-coded (first key, then key[i]-key[i-1]-1): a form byte, then
// the gaps as little-endian uint16s when every gap is below 2^16 (a
// working set of thousands of keys of millions: decoded without a branch
// per key, where varints of one and two bytes in about equal parts cost a
// mispredicted branch every other key), else as unsigned varints, or as
// runs of consecutive keys where that is shorter (keysRuns); the form is
// the one the encoder must choose, so each key set has one encoding.
// A decoder
// checks every length against the bytes present before it allocates and
// rejects trailing bytes, so garbage yields an error, never a panic.
//
//	hello      kind=1 | version u8 | P u64 | servers u32 | consistency u8 | optimizer u8 |
//	           staleness u32 | low u32 | high u32 | lr f32 | momentum f32 | wd f32 | eps f32
//	pull range kind=2 | clock u32 | lo u64 | hi u64
//	pull keys  kind=3 | clock u32 | n u32 | n keys
//	push range kind=4 | enc u8 | 0 u16 | clock u32 | lo u64 | n u32 | n values (enc)
//	push keys  kind=5 | enc u8 | 0 u16 | clock u32 | n u32 | n values (enc) | n keys
//	done       kind=6 | clock u32
//	push+pull  kind=7 | as push range: the push, then a pull of the same keys
//	           (answered with values once the consistency model lets the
//	           worker's next iteration start)
//	push+pull keys kind=8 | as push keys
//	ok         kind=16 | held ns i64
//	values     kind=17 | staleness u32 | held ns i64 | n u32 | n float32
//	error      kind=18 | code u8 | len u32 | text
//	wait       kind=19                       (keep-alive while a request is held)
//
// clock is the sender's push count, which the server checks against its own
// bookkeeping; held is how long the server held the request. A push's values
// start at a multiple of 4 bytes (20 for a range, 12 for keys), so that a
// server views float32 values in the received buffer in place instead of
// copying them (version 2; version 1 had no padding and keys before
// values). Version 3 added the runs form of keys.

// Tags of the ps messages, from the registry's range (collectives.TagPSBase).
const (
	RequestTag = collectives.TagPSBase + iota
	ReplyTag
	// PayloadTag carries out-of-band float32 values (see flagValuesFollow).
	PayloadTag
	// ReplicaTag (replica.go) is PayloadTag + 1.
)

// Flags in the kind byte. On a transport that also moves float32 buffers
// (Isend/Irecv, as every collectives.Comm does), float32 values travel as
// a separate message on PayloadTag straight from the sender's slice into
// the receiver's (no encoding, decoding or staging copies):
//
//   - flagValuesFollow on a push (float32 only) or a values reply: the
//     message carries no values; n float32s follow on PayloadTag.
//   - flagReplyApart on a pull or push+pull: the worker asks for its values
//     reply with flagValuesFollow.
const (
	flagValuesFollow = 0x80
	flagReplyApart   = 0x40
	kindMask         = 0x3f
)

const wireVersion = 3

type msgKind uint8

const (
	kindHello     msgKind = 1
	kindPullRange msgKind = 2
	kindPullKeys  msgKind = 3
	kindPushRange msgKind = 4
	kindPushKeys  msgKind = 5
	kindDone      msgKind = 6
	kindPushPull  msgKind = 7 // fused push range + pull of the same range
	kindPushPullK msgKind = 8 // fused push keys + pull of the same keys
	kindOK        msgKind = 16
	kindValues    msgKind = 17
	kindError     msgKind = 18
	kindWait      msgKind = 19
)

var kindNames = map[msgKind]string{
	kindHello: "hello", kindPullRange: "pull", kindPullKeys: "pull keys", kindPushRange: "push",
	kindPushKeys: "push keys", kindDone: "done", kindPushPull: "push+pull", kindPushPullK: "push+pull keys", kindOK: "ok", kindValues: "values",
	kindError: "error", kindWait: "wait",
}

// isPush reports whether k carries push values (push, push keys, fused).
func (k msgKind) isPush() bool {
	return k == kindPushRange || k == kindPushKeys || k == kindPushPull || k == kindPushPullK
}

// keyed reports whether k's push values belong to a key list.
func (k msgKind) keyed() bool { return k == kindPushKeys || k == kindPushPullK }

func (k msgKind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// Encoding is how a push carries its values on the wire.
type Encoding uint8

const (
	// Float32 sends values as IEEE binary32 (4 bytes).
	Float32 Encoding = iota
	// Float16 sends values as IEEE binary16 (2 bytes), rounded to nearest even.
	Float16
	// BFloat16 sends values as bfloat16 (2 bytes), rounded to nearest even.
	BFloat16
)

var encodingNames = [...]string{Float32: "fp32", Float16: "fp16", BFloat16: "bf16"}

// String returns "fp32", "fp16" or "bf16".
func (e Encoding) String() string {
	if int(e) < len(encodingNames) {
		return encodingNames[e]
	}
	return fmt.Sprintf("encoding(%d)", e)
}

// width is the bytes per value, 0 for an unknown encoding.
func (e Encoding) width() int {
	switch e {
	case Float32:
		return 4
	case Float16, BFloat16:
		return 2
	}
	return 0
}

// Error codes of an error reply.
const (
	codeRejected = 1
	codeMissing  = 2
)

// helloInfo is what a worker tells a server at NewWorker, so that the server
// can refuse a worker whose configuration differs from its own.
type helloInfo struct {
	version                 uint8
	p                       uint64
	servers                 uint32
	consistency             Consistency
	optimizer               optim.Kind
	staleness, low, high    uint32
	lr, momentum, wd, eps32 float32
}

func helloFor(cfg Config, p int) helloInfo {
	return helloInfo{
		version: wireVersion, p: uint64(p), servers: uint32(cfg.Servers),
		consistency: cfg.Consistency, optimizer: cfg.Optimizer,
		staleness: uint32(cfg.Staleness), low: uint32(cfg.StalenessLow), high: uint32(cfg.StalenessHigh),
		lr: cfg.LR, momentum: cfg.Momentum, wd: cfg.WeightDecay, eps32: cfg.Eps,
	}
}

// diff describes the first field where h (the worker's) differs from want
// (the server's), or returns "".
func (h helloInfo) diff(want helloInfo) string {
	type field struct {
		name      string
		got, want any
	}
	fs := []field{
		{"wire version", h.version, want.version}, {"model size P", h.p, want.p},
		{"servers", h.servers, want.servers}, {"consistency", h.consistency, want.consistency},
		{"optimizer", h.optimizer, want.optimizer}, {"staleness", h.staleness, want.staleness},
		{"dssp low", h.low, want.low}, {"dssp high", h.high, want.high},
		{"lr", h.lr, want.lr}, {"momentum", h.momentum, want.momentum},
		{"weight decay", h.wd, want.wd}, {"eps", h.eps32, want.eps32},
	}
	for _, f := range fs {
		if f.got != f.want {
			return fmt.Sprintf("%s %v, server has %v", f.name, f.got, f.want)
		}
	}
	return ""
}

// message is a decoded ps message. Which fields are set depends on kind.
type message struct {
	kind   msgKind
	clock  uint32
	enc    Encoding
	lo, hi int64   // pull range [lo,hi); push range lo (hi = lo+n)
	n      int     // number of keys and/or values
	keys   []int64 // pull/push keys
	// runs: the keys came as runs (keysRuns): mostly consecutive, worth
	// serving range by range.
	runs bool
	raw  []byte // the n values, still encoded (aliases the input); nil if they follow apart
	// valuesFollow: the n float32 values come as a message of their own on
	// PayloadTag; replyApart: the sender wants its values reply that way.
	valuesFollow, replyApart bool
	hello                    helloInfo
	staleness                uint32
	held                     time.Duration
	code                     uint8
	text                     string
}

// --- encoding -----------------------------------------------------------

func appendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

// Key block forms (the byte before the gaps).
const (
	keysU16    = 0 // every gap below 2^16: n little-endian uint16s
	keysVarint = 1 // some gap of 2^16 or more: n unsigned varints
	// keysRuns: the keys as maximal runs of consecutive keys: the number
	// of runs, then for each its gap from the key after the last run's
	// end and its length − 1, all unsigned varints. A dense model's push
	// without the embedding rows its batch did not touch is a few runs of
	// many keys each: a few bytes instead of two per key.
	keysRuns = 2
)

// appendKeys delta-codes keys, which must be strictly increasing and >= 0,
// in the one form a decoder accepts for them: runs where most keys follow
// the key before and the runs are strictly shorter than the gaps (asRuns);
// else the gaps, two bytes each where every gap fits.
func appendKeys(b []byte, keys []int64) []byte {
	start := len(b)
	b, follow := appendKeysGaps(b, keys)
	if asRuns(keys, follow, len(b)-start-1) {
		return appendKeysRuns(append(b[:start], keysRuns), keys)
	}
	return b
}

// appendKeysGaps writes keys' gaps: as two bytes each where every gap
// fits, else as varints; follow is how many gaps are 0.
func appendKeysGaps(b []byte, keys []int64) (_ []byte, follow int) {
	start := len(b)
	b = slices.Grow(b, 1+2*len(keys))[:start+1+2*len(keys)]
	b[start] = keysU16
	out := b[start+1:]
	prev := int64(-1)
	for i, k := range keys {
		d := uint64(k - prev - 1)
		if d >= 1<<16 { // a gap too wide for two bytes, or keys out of order
			if k <= prev {
				panic(fmt.Sprintf("ps: appendKeys: keys not strictly increasing (%d after %d)", k, prev))
			}
			return appendKeysVarint(append(b[:start], keysVarint), keys)
		}
		out[2*i], out[2*i+1] = byte(d), byte(d>>8)
		follow += follows(d)
		prev = k
	}
	return b, follow
}

// follows is 1 for a key right after the key before it (its gap d is
// 0), else 0; without a branch (a gap wider than 2^63 is not a gap).
func follows(d uint64) int { return int((d - 1) >> 63) }

// asRuns is the rule for the runs form: keys, of which follow have a gap
// of 0 and whose gaps take gaps bytes, go as runs when most of them
// follow the key before (so that sparse keys pay no second pass) and the
// runs are strictly shorter.
func asRuns(keys []int64, follow, gaps int) bool {
	return 2*follow > len(keys) && runsLen(keys) < gaps
}

// runsShorter is asRuns for n keys whose runs take runs bytes.
func runsShorter(n, follow, gaps, runs int) bool { return 2*follow > n && runs < gaps }

// gapsLen is the bytes of keys' gaps (the form byte not included): two
// per key where every gap fits, else their varints; follow is how many
// gaps are 0.
func gapsLen(keys []int64) (n, follow int) {
	prev, wide := int64(-1), false
	for _, k := range keys {
		d := uint64(k - prev - 1)
		wide = wide || d >= 1<<16
		n += uvarintLen(d)
		follow += follows(d)
		prev = k
	}
	if !wide {
		return 2 * len(keys), follow
	}
	return n, follow
}

// runEnd is the end of the run of consecutive keys that starts at
// keys[i]: the first j > i where keys[j] is not keys[j-1]+1.
func runEnd(keys []int64, i int) int {
	j := i + 1
	for j < len(keys) && keys[j] == keys[j-1]+1 {
		j++
	}
	return j
}

// runsLen is the bytes of keys as runs (keysRuns; the count included,
// the form byte not); math.MaxInt for keys out of order or below 0.
func runsLen(keys []int64) int {
	runs, n := 0, 0
	next := int64(0) // the key after the previous run
	for i := 0; i < len(keys); {
		if keys[i] < next {
			return math.MaxInt
		}
		j := runEnd(keys, i)
		runs++
		n += uvarintLen(uint64(keys[i]-next)) + uvarintLen(uint64(j-i-1))
		next, i = keys[j-1]+1, j
	}
	return uvarintLen(uint64(runs)) + n
}

// uvarintLen is the bytes of v as an unsigned varint.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// appendKeysRuns writes keys as runs (keysRuns, without the form byte).
func appendKeysRuns(b []byte, keys []int64) []byte {
	runs := 0
	for i := 0; i < len(keys); i = runEnd(keys, i) {
		runs++
	}
	b = binary.AppendUvarint(b, uint64(runs))
	next := int64(0)
	for i := 0; i < len(keys); {
		j := runEnd(keys, i)
		b = binary.AppendUvarint(b, uint64(keys[i]-next))
		b = binary.AppendUvarint(b, uint64(j-i-1))
		next, i = keys[j-1]+1, j
	}
	return b
}

// appendKeysVarint writes the gaps of keys as unsigned varints; follow is
// how many are 0.
func appendKeysVarint(b []byte, keys []int64) (_ []byte, follow int) {
	prev := int64(-1)
	for _, k := range keys {
		if k <= prev {
			panic(fmt.Sprintf("ps: appendKeys: keys not strictly increasing (%d after %d)", k, prev))
		}
		d := uint64(k - prev - 1)
		b = binary.AppendUvarint(b, d)
		follow += follows(d)
		prev = k
	}
	return b, follow
}

// appendValues encodes vs with enc.
func appendValues(b []byte, vs []float32, enc Encoding) []byte {
	switch enc {
	case Float32:
		if littleEndian {
			return append(b, float32Bytes(vs)...) // the wire order is the memory order
		}
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	case Float16, BFloat16:
		n := len(b)
		b = slices.Grow(b, 2*len(vs))[:n+2*len(vs)]
		out := b[n:]
		if littleEndian && len(vs) > 0 && uintptr(unsafe.Pointer(&out[0]))%2 == 0 {
			// The wire order is the memory order: write uint16s in place.
			u := unsafe.Slice((*uint16)(unsafe.Pointer(&out[0])), len(vs))
			if enc == Float16 {
				for i, v := range vs {
					u[i] = half.Float32ToFloat16(v)
				}
			} else {
				for i, v := range vs {
					u[i] = half.Float32ToBFloat16(v)
				}
			}
			return b
		}
		for i, v := range vs {
			h := half.Float32ToBFloat16(v)
			if enc == Float16 {
				h = half.Float32ToFloat16(v)
			}
			binary.LittleEndian.PutUint16(out[2*i:], h)
		}
	default:
		panic(fmt.Sprintf("ps: appendValues: %v", enc))
	}
	return b
}

func appendHello(b []byte, h helloInfo) []byte {
	b = append(b, byte(kindHello), h.version)
	b = appendU64(b, h.p)
	b = appendU32(b, h.servers)
	b = append(b, byte(h.consistency), byte(h.optimizer))
	b = appendU32(b, h.staleness)
	b = appendU32(b, h.low)
	b = appendU32(b, h.high)
	for _, f := range []float32{h.lr, h.momentum, h.wd, h.eps32} {
		b = appendU32(b, math.Float32bits(f))
	}
	return b
}

func appendPullRange(b []byte, clock uint32, lo, hi int64) []byte {
	b = append(b, byte(kindPullRange))
	b = appendU32(b, clock)
	b = appendU64(b, uint64(lo))
	return appendU64(b, uint64(hi))
}

func appendPullKeys(b []byte, clock uint32, keys []int64) []byte {
	b = append(b, byte(kindPullKeys))
	b = appendU32(b, clock)
	b = appendU32(b, uint32(len(keys)))
	return appendKeys(b, keys)
}

func appendPushRange(b []byte, clock uint32, enc Encoding, lo int64, vs []float32) []byte {
	return appendPushRangeKind(b, kindPushRange, clock, enc, lo, vs)
}

// appendPushRangeKind encodes a push range (kind kindPushRange) or a fused
// push+pull of the same range (kindPushPull).
func appendPushRangeKind(b []byte, kind msgKind, clock uint32, enc Encoding, lo int64, vs []float32) []byte {
	b = append(b, byte(kind), byte(enc), 0, 0)
	b = appendU32(b, clock)
	b = appendU64(b, uint64(lo))
	b = appendU32(b, uint32(len(vs)))
	return appendValues(b, vs, enc)
}

func appendPushKeys(b []byte, clock uint32, enc Encoding, keys []int64, vs []float32) []byte {
	return appendPushKeysKind(b, kindPushKeys, clock, enc, keys, vs)
}

// appendPushKeysKind encodes a push keys (kindPushKeys) or a fused push+pull
// of the same keys (kindPushPullK).
func appendPushKeysKind(b []byte, kind msgKind, clock uint32, enc Encoding, keys []int64, vs []float32) []byte {
	if len(keys) != len(vs) {
		panic(fmt.Sprintf("ps: appendPushKeys: %d keys, %d values", len(keys), len(vs)))
	}
	b = append(b, byte(kind), byte(enc), 0, 0)
	b = appendU32(b, clock)
	b = appendU32(b, uint32(len(keys)))
	b = appendValues(b, vs, enc)
	return appendKeys(b, keys)
}

// appendPushRangeApart is a push range (or push+pull) header whose n
// float32 values follow apart.
func appendPushRangeApart(b []byte, kind msgKind, clock uint32, lo int64, n int) []byte {
	b = append(b, byte(kind)|flagValuesFollow, byte(Float32), 0, 0)
	b = appendU32(b, clock)
	b = appendU64(b, uint64(lo))
	return appendU32(b, uint32(n))
}

// appendPushKeysApart is a push keys (or push+pull keys) header whose
// float32 values follow apart.
func appendPushKeysApart(b []byte, kind msgKind, clock uint32, keys []int64) []byte {
	b = append(b, byte(kind)|flagValuesFollow, byte(Float32), 0, 0)
	b = appendU32(b, clock)
	b = appendU32(b, uint32(len(keys)))
	return appendKeys(b, keys)
}

func appendDone(b []byte, clock uint32) []byte {
	return appendU32(append(b, byte(kindDone)), clock)
}

func appendOK(b []byte, held time.Duration) []byte {
	return appendU64(append(b, byte(kindOK)), uint64(held))
}

func appendValuesReply(b []byte, staleness uint32, held time.Duration, vs []float32) []byte {
	b = append(b, byte(kindValues))
	b = appendU32(b, staleness)
	b = appendU64(b, uint64(held))
	b = appendU32(b, uint32(len(vs)))
	return appendValues(b, vs, Float32)
}

// appendValuesHeader is a values reply whose n float32s follow apart.
func appendValuesHeader(b []byte, staleness uint32, held time.Duration, n int) []byte {
	b = append(b, byte(kindValues)|flagValuesFollow)
	b = appendU32(b, staleness)
	b = appendU64(b, uint64(held))
	return appendU32(b, uint32(n))
}

func appendError(b []byte, code uint8, text string) []byte {
	b = append(b, byte(kindError), code)
	b = appendU32(b, uint32(len(text)))
	return append(b, text...)
}

func appendWait(b []byte) []byte { return append(b, byte(kindWait)) }
