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

// TestKeysWire: appendKeys writes the form byte and the gaps or the runs
// exactly as the wire format says (runs when most gaps are 0 and the runs
// are strictly shorter; else
// two-byte gaps when all fit, at every boundary, else varints), after
// existing bytes, and reader.keys reads them back.
func TestKeysWire(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	gaps := []int64{0, 1, 126, 127, 128, 129, 16382, 16383, 16384, 16385, 1 << 21, 1 << 40}
	forms := map[byte]int{}
	for trial := range 300 {
		n := r.IntN(300)
		keys := make([]int64, n)
		prev := int64(-1)
		for i := range keys {
			g := gaps[r.IntN(len(gaps))]
			switch trial % 3 {
			case 0:
				g = r.Int64N(300)
			case 2: // long runs, now and then a gap (a dense push less some rows)
				g = 0
				if r.IntN(40) == 0 {
					g = gaps[r.IntN(len(gaps))]
				}
			}
			prev += g + 1
			keys[i] = prev
		}
		head := []byte("hdr")
		b := appendKeys(slices.Clone(head)[:3:3], keys)
		// The references: two-byte gaps when every gap fits, else varints;
		// the runs where most gaps are 0 and the runs are shorter.
		wide, p, zeros := false, int64(-1), 0
		for _, k := range keys {
			wide = wide || k-p-1 >= 1<<16
			if k == p+1 {
				zeros++
			}
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
		var runs [][2]int64 // gap, length
		next := int64(0)
		for i := 0; i < len(keys); {
			j := i + 1
			for j < len(keys) && keys[j] == keys[j-1]+1 {
				j++
			}
			runs = append(runs, [2]int64{keys[i] - next, int64(j - i)})
			next, i = keys[j-1]+1, j
		}
		asRuns := binary.AppendUvarint(append(slices.Clone(head), keysRuns), uint64(len(runs)))
		for _, run := range runs {
			asRuns = binary.AppendUvarint(binary.AppendUvarint(asRuns, uint64(run[0])), uint64(run[1]-1))
		}
		if len(asRuns) < len(want) && 2*zeros > n {
			want = asRuns
		}
		if !bytes.Equal(b, want) {
			t.Fatalf("trial %d: appendKeys wrote %x, want %x", trial, b, want)
		}
		if got := keysLen(keys); got != len(b)-3 {
			t.Fatalf("trial %d: keysLen %d, appendKeys wrote %d", trial, got, len(b)-3)
		}
		forms[b[3]]++
		rd := &reader{b: b[3:], maxKeys: n}
		got := rd.keys(n, nil)
		if rd.err != nil || !slices.Equal(got, keys) || len(rd.b) != 0 {
			t.Fatalf("trial %d: read %v (err %v, %d bytes left), want %v", trial, got, rd.err, len(rd.b), keys)
		}
	}
	for _, f := range []byte{keysU16, keysVarint, keysRuns} {
		if forms[f] == 0 {
			t.Errorf("no trial wrote form %d (forms written: %v)", f, forms)
		}
	}
}

// TestKeysRunsShort: a dense push less a few rows (keys 0..9999 without
// 40 rows of 8) takes a few bytes of keys, and back.
func TestKeysRunsShort(t *testing.T) {
	var keys []int64
	for k := range int64(10000) {
		if row := k / 8; row%31 == 5 && row < 31*40 {
			continue
		}
		keys = append(keys, k)
	}
	b := appendKeys(nil, keys)
	if b[0] != keysRuns || len(b) > 1+2+41*4 {
		t.Fatalf("%d keys in 41 runs took %d bytes (form %d)", len(keys), len(b), b[0])
	}
	rd := &reader{b: b, maxKeys: 10000}
	if got := rd.keys(len(keys), nil); rd.err != nil || !slices.Equal(got, keys) {
		t.Fatalf("read back: %v", rd.err)
	}
}

// TestKeysRejectsBadKeys: non-minimal varints, truncation, overflow, an
// unknown form and a non-canonical one (varints where two-byte gaps fit,
// runs that are not maximal or not shorter), runs that hold other than
// the keys announced or more keys than there are, are errors, not keys.
func TestKeysRejectsBadKeys(t *testing.T) {
	wide := binary.AppendUvarint(nil, 1<<20) // a gap that needs the varint form
	runs := func(rs ...uint64) []byte {
		b := []byte{keysRuns}
		for _, v := range rs {
			b = binary.AppendUvarint(b, v)
		}
		return b
	}
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
		{"runs: more keys than there are", runs(1, 0, 99), 100 + 1},
		{"runs: fewer keys than announced", runs(1, 0, 49), 100},
		{"runs: more keys than announced", runs(1, 0, 99), 99},
		{"runs: not maximal", runs(2, 0, 49, 0, 49), 100},
		{"runs: not shorter than gaps", runs(2, 0, 0, 5, 0), 2},
		{"runs: none", runs(0), 0},
		{"runs: truncated", runs(2, 0, 49)[:4], 100},
		{"runs: count beyond the bytes", runs(50, 0, 49), 100},
		{"runs: overflow", runs(2, 0, 49, math.MaxInt64-10, 49), 100},
		{"runs: non-minimal length", append(runs(1, 0), 0xe3, 0x80, 0x00), 100},
		{"runs: trailing run", runs(1, 0, 99, 3, 0), 100},
		{"gaps where runs are shorter", append([]byte{keysU16}, make([]byte, 200)...), 100},
		{"varints where runs are shorter", append(binary.AppendUvarint([]byte{keysVarint}, 70000), make([]byte, 99)...), 100},
	} {
		rd := &reader{b: tc.b, maxKeys: 100}
		got := rd.keys(tc.n, nil)
		if rd.err == nil && len(rd.b) == 0 {
			t.Errorf("%s: %x: read %v, want an error", tc.name, tc.b, got)
		}
	}
	// The good forms of the runs cases above read back.
	rd := &reader{b: runs(1, 0, 99), maxKeys: 100}
	if got := rd.keys(100, nil); rd.err != nil || len(got) != 100 || got[99] != 99 {
		t.Errorf("100 keys in one run: %v (%v)", got, rd.err)
	}
}

// TestKeysOneForm: every set of keys within 12 of a base (0, 1, 2^16,
// 2^17, and the largest keys) reads back from exactly one of the three
// forms, the one appendKeys writes.
func TestKeysOneForm(t *testing.T) {
	for _, base := range []int64{0, 1, 1 << 16, 1 << 17, math.MaxInt64 - 11} {
		for set := range 1 << 12 {
			var keys []int64
			for b := range 12 {
				if set&(1<<b) != 0 {
					keys = append(keys, base+int64(b))
				}
			}
			forms := map[byte][]byte{keysVarint: {keysVarint}, keysRuns: appendKeysRuns([]byte{keysRuns}, keys)}
			u16 := []byte{keysU16}
			prev := int64(-1)
			for _, k := range keys {
				d := uint64(k - prev - 1)
				forms[keysVarint] = binary.AppendUvarint(forms[keysVarint], d)
				if u16 != nil && d < 1<<16 {
					u16 = binary.LittleEndian.AppendUint16(u16, uint16(d))
				} else {
					u16 = nil
				}
				prev = k
			}
			if u16 != nil {
				forms[keysU16] = u16
			}
			want := appendKeys(nil, keys)
			accepted := 0
			for f, b := range forms {
				rd := &reader{b: b, maxKeys: len(keys)}
				got := rd.keys(len(keys), nil)
				if rd.err != nil || len(rd.b) != 0 {
					continue
				}
				accepted++
				if !slices.Equal(got, keys) || !bytes.Equal(b, want) {
					t.Fatalf("base %d set %012b: form %d read %v from %x; appendKeys wrote %x", base, set, f, got, b, want)
				}
			}
			if accepted != 1 {
				t.Fatalf("base %d set %012b: %d forms accepted, want 1", base, set, accepted)
			}
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
