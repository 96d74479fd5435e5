package hugemem

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

func TestFloats(t *testing.T) {
	for _, n := range []int{0, 10, MinBytes/4 - 1, MinBytes / 4, 3*MinBytes/4 + 5} {
		tb := Floats(n)
		if len(tb.F) != n {
			t.Fatalf("Floats(%d): len %d", n, len(tb.F))
		}
		for i := range tb.F {
			if tb.F[i] != 0 {
				t.Fatalf("Floats(%d)[%d] = %v, want 0", n, i, tb.F[i])
			}
			tb.F[i] = float32(i)
		}
		for i := range tb.F {
			if tb.F[i] != float32(i) {
				t.Fatalf("Floats(%d)[%d] = %v after writing %d", n, i, tb.F[i], i)
			}
		}
		big := n*4 >= MinBytes
		if tb.Huge() && !big {
			t.Errorf("Floats(%d): a small table on huge pages", n)
		}
		thp, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
		if big && runtime.GOOS == "linux" && len(thp) > 0 && !strings.Contains(string(thp), "[never]") && !tb.Huge() {
			t.Errorf("Floats(%d): not mapped for huge pages (THP: %s)", n, strings.TrimSpace(string(thp)))
		}
	}
	runtime.GC() // the cleanups unmap the big tables; nothing may touch them now
	runtime.GC()
}
