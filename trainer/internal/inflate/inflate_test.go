package inflate

import (
	"strings"
	"testing"
)

func TestLimit(t *testing.T) {
	for _, tc := range []struct{ in, want int64 }{
		{0, Floor},
		{1000, Floor},
		{Floor / MaxRatio, Floor},
		{1 << 20, MaxRatio << 20},
		{1 << 61, 1 << 62}, // no overflow
	} {
		if got := Limit(tc.in); got != tc.want {
			t.Errorf("Limit(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
	if r := Reason(1000); !strings.Contains(r, "at most 33554432") || !strings.Contains(r, "decompress the file first") {
		t.Errorf("Reason: %q", r)
	}
}
