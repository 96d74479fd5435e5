package kernels

import "testing"

// TestDropoutKeys: the threshold drops the share asked for; row keys
// differ with the seed, the epoch and the sample (and not otherwise).
func TestDropoutKeys(t *testing.T) {
	for _, c := range []struct {
		p    float64
		want uint32
	}{{0, 0}, {0.5, 1 << 31}, {0.25, 1 << 30}, {0.9999999999999999, 1<<32 - 1}} {
		if got := DropoutThreshold(c.p); got != c.want {
			t.Errorf("DropoutThreshold(%v) = %d, want %d", c.p, got, c.want)
		}
	}
	k := DropoutRowKey(1, 2, 3)
	if k != DropoutRowKey(1, 2, 3) {
		t.Error("a row key is not a function of its arguments")
	}
	for _, o := range []uint32{DropoutRowKey(2, 2, 3), DropoutRowKey(1, 3, 3), DropoutRowKey(1, 2, 4), DropoutRowKey(1<<32+1, 2, 3), DropoutRowKey(1, 2, 3+1<<32)} {
		if o == k {
			t.Errorf("row keys collide: %#x", k)
		}
	}
}
