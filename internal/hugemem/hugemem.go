// Package hugemem allocates large float32 tables on transparent huge pages.
//
// A parameter server's range is updated at random keys: a sparse push
// touches thousands of keys spread over megabytes, and with 4 KiB pages
// each key is likely a TLB miss, which on a virtual machine walks two page
// tables. On 2 MiB pages a table of tens of megabytes fits the TLB.
// Measured with `dml bench ps --keys 5000 --of 1000000 --fused` (1 server,
// 2 workers, a 4 MB table, 2-core KVM guest), 3 runs each taking turns:
// 2,346–3,051 round trips/s per worker on huge pages, 2,465–2,636 without:
// a gain within this machine's noise at that size (most of the cost of a
// cold table there was the update loop's, see optim.StepKeys); the larger
// the table beyond the TLB's reach (about 8 MB with 4 KiB pages), the more
// it pays.
//
// Linux only: kernels with transparent huge pages in "madvise" mode (the
// default of Debian and most distributions) give them to memory marked
// MADV_HUGEPAGE, which Go's heap is not. Elsewhere, for a small table, or
// when the mapping fails, Floats is make.
package hugemem

import (
	"runtime"
)

// MinBytes is the smallest table placed on huge pages: one huge page.
const MinBytes = 2 << 20

// Table is a float32 table and what it takes to give its memory back.
type Table struct {
	F    []float32
	free func()
}

// Floats returns a zeroed table of n floats, on huge pages when it is at
// least MinBytes and the system allows. The memory is returned when the
// Table is no longer reachable: keep the Table, not only F, and keep its
// holder reachable (runtime.KeepAlive) to the end of a use of F that may
// come after the holder's last use, or F's pages can be unmapped under
// the reader (a slice of mapped memory keeps nothing alive).
func Floats(n int) *Table {
	t := &Table{}
	if n*4 >= MinBytes {
		if f, free := mapHuge(n); f != nil {
			t.F, t.free = f, free
			runtime.AddCleanup(t, func(free func()) { free() }, free)
			return t
		}
	}
	t.F = make([]float32, n)
	return t
}

// Huge says whether t is on memory mapped for huge pages.
func (t *Table) Huge() bool { return t.free != nil }
