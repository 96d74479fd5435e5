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

// TestKeysWire: appendKeys writes the form byte and the gaps exactly as the
// wire format says (two-byte gaps when all fit, at every boundary, else
// varints), after existing bytes, and reader.keys reads them back.
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
		// The reference: two-byte gaps when every gap fits, else varints.
		wide, p := false, int64(-1)
		for _, k := range keys {
			wide = wide || k-p-1 >= 1<<16
			p = k
		}
		want := slices.Clone(head)
		if wide {
			want = append(want, keysVarint)
		} else {
			want = append(want, keysU16)
		}
		p = -1
		for _, k := range keys {
			if wide {
				want = binary.AppendUvarint(want, uint64(k-p-1))
			} else {
				want = binary.LittleEndian.AppendUint16(want, uint16(k-p-1))
			}
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

// TestKeysRejectsBadKeys: non-minimal varints, truncation, overflow, an
// unknown form and a non-canonical one (varints where two-byte gaps fit)
// are errors, not keys.
func TestKeysRejectsBadKeys(t *testing.T) {
	wide := binary.AppendUvarint(nil, 1<<20) // a gap that needs the varint form
	for _, tc := range []struct {
		name string
		b    []byte
		n    int
	}{
		{"non-minimal", append([]byte{keysVarint, 0x80, 0x00}, wide...), 2},
		{"non-minimal 3 bytes", append([]byte{keysVarint, 0x85, 0x80, 0x00}, wide...), 2},
		{"truncated varint", append([]byte{keysVarint}, 0x85), 1},
		{"second key truncated", append(append([]byte{keysVarint}, wide...), 0x80), 2},
		{"overflow", binary.AppendUvarint([]byte{keysVarint, 0x05}, math.MaxUint64), 2},
		{"not canonical", []byte{keysVarint, 0x05, 0x07}, 2},
		{"truncated u16", []byte{keysU16, 0x05, 0x00, 0x07}, 2},
		{"unknown form", []byte{7, 0x05, 0x00}, 1},
		{"no form byte", []byte{}, 0},
	} {
		rd := &reader{b: tc.b}
		if got := rd.keys(tc.n, nil); rd.err == nil {
			t.Errorf("%s: %x: read %v, want an error", tc.name, tc.b, got)
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
