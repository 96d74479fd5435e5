package ps

import (
	"errors"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the decoder: it must return a message
// or an ErrBadMessage error, never panic, and a decoded message must encode
// back to the same bytes. The seed corpus is in testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	f.Add(appendPushKeys(nil, 1, Float16, []int64{2, 9}, []float32{1, -1}))
	// Keys as runs: 0..39 and 50..89.
	runKeys := append(seq(0, 40), seq(50, 90)...)
	f.Add(appendPushKeys(nil, 2, Float32, runKeys, make([]float32, len(runKeys))))
	f.Add(appendPullKeys(nil, 2, runKeys))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decode(b)
		if err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("decode error %v does not wrap ErrBadMessage", err)
			}
			return
		}
		vals := m.floats() // must not panic either
		if got := reencode(m, vals); got != nil && string(got) != string(b) {
			t.Fatalf("re-encoding %x gave %x", b, got)
		}
	})
}

// reencode encodes m again, or returns nil where the encoding is not unique
// (NaN payloads change when float16 NaNs are made quiet).
func reencode(m message, vals []float32) []byte {
	for _, v := range vals {
		if v != v {
			return nil
		}
	}
	if m.valuesFollow {
		return nil // the values are not in the message: nothing to compare
	}
	b := reencodeKind(m, vals)
	if b != nil && m.replyApart {
		b[0] |= flagReplyApart // a pull that wants its values apart (worker.go)
	}
	return b
}

func reencodeKind(m message, vals []float32) []byte {
	switch m.kind {
	case kindHello:
		return appendHello(nil, m.hello)
	case kindPullRange:
		return appendPullRange(nil, m.clock, m.lo, m.hi)
	case kindPullKeys:
		return appendPullKeys(nil, m.clock, m.keys)
	case kindPushRange:
		return appendPushRange(nil, m.clock, m.enc, m.lo, vals)
	case kindPushKeys:
		return appendPushKeys(nil, m.clock, m.enc, m.keys, vals)
	case kindDone:
		return appendDone(nil, m.clock)
	case kindOK:
		return appendOK(nil, m.held)
	case kindValues:
		return appendValuesReply(nil, m.staleness, m.held, vals)
	case kindError:
		return appendError(nil, m.code, m.text)
	case kindWait:
		return appendWait(nil)
	}
	return nil
}

// seq is the keys lo..hi-1.
func seq(lo, hi int64) []int64 {
	var ks []int64
	for k := lo; k < hi; k++ {
		ks = append(ks, k)
	}
	return ks
}
