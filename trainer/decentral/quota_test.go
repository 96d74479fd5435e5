package decentral

import "testing"

// TestStepQuota: the shares add up to what is left of the cap, differ by
// at most one, and the first ranks take the extra steps; no cap, none.
func TestStepQuota(t *testing.T) {
	for _, tc := range []struct{ max, done, n int }{{0, 0, 3}, {1, 0, 3}, {7, 0, 3}, {10, 4, 4}, {5, 9, 2}, {100, 0, 7}} {
		sum, lo, hi := 0, 1<<30, -1
		for r := range tc.n {
			q := stepQuota(tc.max, tc.done, r, tc.n)
			sum += q
			lo, hi = min(lo, q), max(hi, q)
			if r > 0 && q > stepQuota(tc.max, tc.done, r-1, tc.n) {
				t.Errorf("%+v: rank %d takes more than rank %d", tc, r, r-1)
			}
		}
		if want := max(0, tc.max-tc.done); sum != want || hi-lo > 1 {
			t.Errorf("%+v: shares add to %d (want %d), from %d to %d", tc, sum, want, lo, hi)
		}
	}
	if q := stepQuota(-1, 0, 0, 2); q >= 0 {
		t.Errorf("no cap: quota %d", q)
	}
}
