package collectives

import (
	"fmt"
	"testing"
)

// TestRingPipelineMatches plays the pipelined ring out on every rank: what
// each rank sends to its right neighbour (RingPipeline's doc says when) must
// be, tag by tag and in order, what that neighbour expects to receive, and
// every rank must be able to run its receive list to the end without waiting
// on a message that is only sent after (no deadlock).
func TestRingPipelineMatches(t *testing.T) {
	type msg struct {
		ag   bool
		span Span
	}
	for _, n := range []int{2, 3, 4, 5, 8} {
		for _, length := range []int{0, 1, n - 1, n, n + 1, 7, 100, 1001} {
			for _, seg := range []int{1, 3, 16, 0} {
				t.Run(fmt.Sprintf("n=%d/len=%d/seg=%d", n, length, seg), func(t *testing.T) {
					chunks := Chunks(length, n)
					orders := make([][]RingRecv, n)
					// queues[r]: messages sent to rank r, per tag, in order.
					queues := make([]map[bool][]msg, n)
					next := make([]int, n)           // next receive each rank handles
					taken := make([]map[bool]int, n) // messages each rank consumed, per tag
					for r := range n {
						orders[r] = RingPipeline(r, n, length, seg)
						queues[r] = map[bool][]msg{}
						taken[r] = map[bool]int{}
					}
					send := func(from int, m msg) {
						to := (from + 1) % n
						queues[to][m.ag] = append(queues[to][m.ag], m)
					}
					for r := range n {
						rs, _ := RingSchedule(r, n)
						for _, sg := range Segments(chunks[rs[0].Send], seg) {
							send(r, msg{false, sg})
						}
					}
					// Run ranks round-robin; each handles receives while
					// the message it waits for is there.
					for progress := true; progress; {
						progress = false
						for r := range n {
							for next[r] < len(orders[r]) {
								it := orders[r][next[r]]
								q := queues[r][it.AllGather]
								if taken[r][it.AllGather] >= len(q) {
									break
								}
								got := q[taken[r][it.AllGather]]
								if got.span != it.Span {
									t.Fatalf("rank %d receive %d (%+v): next message on its tag covers %+v", r, next[r], it, got.span)
								}
								taken[r][it.AllGather]++
								next[r]++
								progress = true
								switch {
								case !it.AllGather && it.Step < n-2:
									send(r, msg{false, it.Span})
								case !it.AllGather || it.Step < n-2:
									send(r, msg{true, it.Span})
								}
							}
						}
					}
					for r := range n {
						if next[r] != len(orders[r]) {
							t.Fatalf("deadlock: rank %d stuck at receive %d of %d", r, next[r], len(orders[r]))
						}
						for _, ag := range []bool{false, true} {
							if taken[r][ag] != len(queues[r][ag]) {
								t.Fatalf("rank %d: %d messages (all-gather %v) sent, %d received", r, len(queues[r][ag]), ag, taken[r][ag])
							}
						}
						// Each element arrives once in the reduce-scatter
						// unless it is in chunk r (only sent there), and once
						// in the all-gather unless it is in chunk r+1 (reduced
						// here).
						cover := make([]int, length)
						for _, it := range orders[r] {
							for i := it.Span.Off; i < it.Span.Off+it.Span.Len; i++ {
								cover[i]++
							}
						}
						in := func(i int, c Span) bool { return i >= c.Off && i < c.Off+c.Len }
						for i, c := range cover {
							want := 2
							if in(i, chunks[r]) || in(i, chunks[(r+1)%n]) {
								want = 1
							}
							if c != want {
								t.Fatalf("rank %d: element %d received %d times, want %d", r, i, c, want)
							}
						}
					}
				})
			}
		}
	}
}

// TestRingPipelineOrder pins the interleaving for a small case: 2 ranks,
// chunks of 3 segments. Rank 0 reduces chunk 1 and gathers chunk 0, one
// segment behind.
func TestRingPipelineOrder(t *testing.T) {
	got := RingPipeline(0, 2, 12, 2)
	want := []RingRecv{
		{false, 0, 0, Span{6, 2}},
		{false, 0, 1, Span{8, 2}},
		{true, 0, 0, Span{0, 2}},
		{false, 0, 2, Span{10, 2}},
		{true, 0, 1, Span{2, 2}},
		{true, 0, 2, Span{4, 2}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("RingPipeline(0, 2, 12, 2) =\n%v\nwant\n%v", got, want)
	}
}
