package ps

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"
)

func TestWireRoundTrip(t *testing.T) {
	vals := []float32{1.5, -2, 0, 0.25, 65504}
	keys := []int64{0, 1, 7, 300, 1 << 40}
	h := helloFor(Config{Servers: 2, Consistency: DSSP, StalenessLow: 1, StalenessHigh: 3, LR: 0.1, Momentum: 0.9}.withDefaults(), 1000)
	for _, tc := range []struct {
		name  string
		b     []byte
		check func(t *testing.T, m message)
	}{
		{"hello", appendHello(nil, h), func(t *testing.T, m message) {
			if m.kind != kindHello || m.hello != h || m.hello.diff(h) != "" {
				t.Errorf("got %+v, want %+v", m.hello, h)
			}
		}},
		{"pull range", appendPullRange(nil, 7, 10, 20), func(t *testing.T, m message) {
			if m.kind != kindPullRange || m.clock != 7 || m.lo != 10 || m.hi != 20 {
				t.Errorf("got %+v", m)
			}
		}},
		{"pull keys", appendPullKeys(nil, 3, keys), func(t *testing.T, m message) {
			if m.kind != kindPullKeys || m.clock != 3 || !reflect.DeepEqual(m.keys, keys) {
				t.Errorf("got %+v", m)
			}
		}},
		{"push range fp32", appendPushRange(nil, 9, Float32, 5, vals), func(t *testing.T, m message) {
			if m.kind != kindPushRange || m.clock != 9 || m.lo != 5 || m.hi != 10 || !reflect.DeepEqual(m.floats(), vals) {
				t.Errorf("got %+v %v", m, m.floats())
			}
		}},
		{"push keys fp16", appendPushKeys(nil, 1, Float16, keys, vals), func(t *testing.T, m message) {
			// every value here is exact in float16
			if m.kind != kindPushKeys || m.enc != Float16 || !reflect.DeepEqual(m.keys, keys) || !reflect.DeepEqual(m.floats(), vals) {
				t.Errorf("got %+v %v", m, m.floats())
			}
		}},
		{"push keys bf16", appendPushKeys(nil, 1, BFloat16, keys[:2], []float32{1.5, -2}), func(t *testing.T, m message) {
			if !reflect.DeepEqual(m.floats(), []float32{1.5, -2}) {
				t.Errorf("got %v", m.floats())
			}
		}},
		{"empty push keys", appendPushKeys(nil, 0, Float32, nil, nil), func(t *testing.T, m message) {
			if m.kind != kindPushKeys || m.n != 0 || len(m.keys) != 0 {
				t.Errorf("got %+v", m)
			}
		}},
		{"done", appendDone(nil, 12), func(t *testing.T, m message) {
			if m.kind != kindDone || m.clock != 12 {
				t.Errorf("got %+v", m)
			}
		}},
		{"ok", appendOK(nil, 3*time.Second), func(t *testing.T, m message) {
			if m.kind != kindOK || m.held != 3*time.Second {
				t.Errorf("got %+v", m)
			}
		}},
		{"values", appendValuesReply(nil, 2, time.Millisecond, vals), func(t *testing.T, m message) {
			if m.kind != kindValues || m.staleness != 2 || m.held != time.Millisecond || !reflect.DeepEqual(m.floats(), vals) {
				t.Errorf("got %+v", m)
			}
		}},
		{"error", appendError(nil, codeMissing, "worker rank 3 missing"), func(t *testing.T, m message) {
			if m.kind != kindError || m.code != codeMissing || m.text != "worker rank 3 missing" {
				t.Errorf("got %+v", m)
			}
		}},
		{"wait", appendWait(nil), func(t *testing.T, m message) {
			if m.kind != kindWait {
				t.Errorf("got %+v", m)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := decode(tc.b)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, m)
			// Every strict prefix and any extra byte must fail cleanly.
			for n := 0; n < len(tc.b); n++ {
				if _, err := decode(tc.b[:n]); !errors.Is(err, ErrBadMessage) {
					t.Fatalf("prefix of %d bytes: err = %v, want ErrBadMessage", n, err)
				}
			}
			if _, err := decode(append(append([]byte(nil), tc.b...), 0)); !errors.Is(err, ErrBadMessage) {
				t.Fatalf("trailing byte: err = %v, want ErrBadMessage", err)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"unknown kind", []byte{0xee}},
		{"reply kind 0", []byte{0}},
		{"unknown encoding", append(appendPushRange(nil, 0, Float32, 0, nil)[:1], 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)},
		{"count larger than payload", func() []byte {
			b := appendPushRange(nil, 0, Float32, 0, []float32{1, 2})
			b[16] = 0xff // n = 255 values in 8 bytes
			return b
		}()},
		{"non-zero padding", func() []byte {
			b := appendPushRange(nil, 0, Float32, 0, []float32{1, 2})
			b[3] = 1
			return b
		}()},
		{"huge count", func() []byte {
			b := appendPullKeys(nil, 0, []int64{1})
			b[5], b[6], b[7], b[8] = 0xff, 0xff, 0xff, 0xff
			return b
		}()},
		{"key overflow", append([]byte{byte(kindPullKeys), 0, 0, 0, 0, 2, 0, 0, 0},
			0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, // MaxInt64-1
			0x05)},
		{"bad varint", []byte{byte(kindPullKeys), 0, 0, 0, 0, 1, 0, 0, 0, 0x80}},
	} {
		if m, err := decode(tc.b); !errors.Is(err, ErrBadMessage) {
			t.Errorf("%s: decode = %+v, %v; want ErrBadMessage", tc.name, m, err)
		}
	}
}

func TestPushLenMatchesEncoding(t *testing.T) {
	keys := []int64{3, 4, 200, 70000}
	vals := []float32{1, 2, 3, 4}
	if got, want := pushKeysLen(keys, Float32), len(appendPushKeys(nil, 0, Float32, keys, vals)); got != want {
		t.Errorf("pushKeysLen = %d, encoded %d", got, want)
	}
	if got, want := pushRangeLen(4, Float16), len(appendPushRange(nil, 0, Float16, 0, vals)); got != want {
		t.Errorf("pushRangeLen = %d, encoded %d", got, want)
	}
}

func TestHelloDiff(t *testing.T) {
	a := helloFor(Config{LR: 0.1}.withDefaults(), 10)
	b := helloFor(Config{LR: 0.2}.withDefaults(), 10)
	if d := b.diff(a); d != "lr 0.2, server has 0.1" {
		t.Errorf("diff = %q", d)
	}
	c := helloFor(Config{LR: 0.1}.withDefaults(), 11)
	if d := c.diff(a); d != "model size P 11, server has 10" {
		t.Errorf("diff = %q", d)
	}
	_ = math.Pi
}
