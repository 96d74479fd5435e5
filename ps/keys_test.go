package ps

import (
	"bytes"
	"encoding/binary"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestKeysWire: appendKeys writes exactly the gap varints binary.AppendUvarint
// would (its in-place one- and two-byte paths included, at every boundary),
// after existing bytes, and reader.keys reads them back.
func TestKeysWire(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	gaps := []int64{0, 1, 126, 127, 128, 129, 16382, 16383, 16384, 16385, 1 << 21, 1 << 40}
	for trial := range 200 {
		n := r.IntN(300)
		keys := make([]int64, n)
		prev := int64(-1)
		for i := range keys {
			g := gaps[r.IntN(len(gaps))]
			if trial%2 == 0 {
				g = r.Int64N(300)
			}
			prev += g + 1
			keys[i] = prev
		}
		head := []byte("hdr")
		b := appendKeys(slices.Clone(head)[:3:3], keys)
		want := slices.Clone(head)
		p := int64(-1)
		for _, k := range keys {
			want = binary.AppendUvarint(want, uint64(k-p-1))
			p = k
		}
		if !bytes.Equal(b, want) {
			t.Fatalf("trial %d: appendKeys wrote %x, want %x", trial, b, want)
		}
		rd := &reader{b: b[3:]}
		got := rd.keys(n, nil)
		if rd.err != nil || !slices.Equal(got, keys) || len(rd.b) != 0 {
			t.Fatalf("trial %d: read %v (err %v, %d bytes left), want %v", trial, got, rd.err, len(rd.b), keys)
		}
	}
}

// TestKeysRejectsBadVarints: non-minimal encodings (also of the inline
// two-byte path), truncation and overflow are errors, not keys.
func TestKeysRejectsBadVarints(t *testing.T) {
	for _, tc := range []struct {
		b []byte
		n int
	}{
		{[]byte{0x80, 0x00}, 1},                                 // 0 in two bytes
		{[]byte{0x85, 0x80, 0x00}, 1},                           // three bytes, last zero
		{[]byte{0x85}, 1},                                       // truncated
		{[]byte{0x01, 0x80}, 2},                                 // second key truncated
		{binary.AppendUvarint([]byte{0x05}, math.MaxUint64), 2}, // overflows int64
	} {
		rd := &reader{b: tc.b}
		if got := rd.keys(tc.n, nil); rd.err == nil {
			t.Errorf("%x: read %v, want an error", tc.b, got)
		}
	}
}

// BenchmarkKeysCodec encodes and decodes the keys of a sparse push: 5,000
// random keys of 1,000,000 (gaps of one and two bytes in about equal parts).
func BenchmarkKeysCodec(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	set := map[int64]bool{}
	for len(set) < 5000 {
		set[r.Int64N(1000000)] = true
	}
	keys := slices.Sorted(maps.Keys(set))
	buf := make([]int64, len(keys))
	enc := appendKeys(nil, keys)
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			enc = appendKeys(enc[:0], keys)
		}
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			rd := &reader{b: enc}
			if rd.keys(len(keys), buf); rd.err != nil {
				b.Fatal(rd.err)
			}
		}
	})
}
