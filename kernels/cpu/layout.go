package cpu

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/dml-project/dml/kernels"
)

// Layouts. A library serving ops (Lib) may leave an output in a layout of
// its own (oneDNN's nChw16c: the channels in blocks of 16, innermost),
// where the next op it serves reads it as it is: a convolution's output
// goes through batch norm, ReLU and the residual sum into the next
// convolution without a reorder. The backend remembers, for each such
// range of memory, its layout (a region). Every op keeps dml's contract,
// whatever the layouts:
//   - an op that reads plain data (every op but the library's, and the
//     per-element ones below) sees plain data: data() reorders a region
//     it touches back to plain, in place, and forgets it, as do
//     Download, View's parent accesses and Buffer.Data;
//   - the per-element ops (Relu, ReluGrad, Sum, Axpy, Scale, Copy) do not
//     care how elements lie as long as their operands lie alike: they run
//     on the region's layout and give it to their output; operands in
//     different layouts are first brought to one (unify);
//   - a region is one whole buffer as an op saw it (the same first element
//     and length); an access to part of it, or to more, reorders the
//     whole region back first.
// Without a library no region is ever made, and each op pays one atomic
// load.

// Layout says how a buffer's elements lie: Plain (0) is dml's own
// (row-major: NCHW activations); other values are the Lib's own.
type Layout int32

// Plain is dml's own layout.
const Plain Layout = 0

// region is a range of memory in a Lib's layout.
type region struct {
	d      []float32
	lo, hi uintptr
	l      Layout
}

// layouts is the backend's regions. Its mutex is for Buffer.Data, which
// code outside may call from another goroutine (on buffers never in a
// library's layout: gradients, weights); the ops run on one goroutine.
type layouts struct {
	mu      sync.Mutex
	n       atomic.Int32 // len(regions), read without the lock
	regions []region
	scratch []float32
}

func span(d []float32) (lo, hi uintptr) {
	if len(d) == 0 {
		return 0, 0
	}
	lo = uintptr(unsafe.Pointer(unsafe.SliceData(d)))
	return lo, lo + 4*uintptr(len(d))
}

// What sweep does with a region it meets.
type fate int

const (
	keep    fate = iota // as it is
	toPlain             // reordered back to plain in place, and forgotten
	drop                // forgotten without a reorder (overwritten, freed)
)

// sweep gives each region that overlaps d the fate f decides (exact: the
// region is d itself, the same first element and length), under the
// lock. Without regions it costs one atomic load.
func (be *Backend) sweep(d []float32, f func(r region, exact bool) fate) {
	if be.lay.n.Load() == 0 || len(d) == 0 {
		return
	}
	be.lay.mu.Lock()
	defer be.lay.mu.Unlock()
	lo, hi := span(d)
	for i := 0; i < len(be.lay.regions); {
		r := be.lay.regions[i]
		if r.hi <= lo || r.lo >= hi {
			i++
			continue
		}
		switch f(r, r.lo == lo && r.hi == hi) {
		case keep:
			i++
			continue
		case toPlain:
			be.reorderInPlace(r.d, r.l, Plain)
		}
		rs := be.lay.regions
		rs[i] = rs[len(rs)-1]
		rs[len(rs)-1] = region{}
		be.lay.regions = rs[:len(rs)-1]
		be.lay.n.Store(int32(len(be.lay.regions)))
	}
}

// plain brings every region d touches back to plain.
func (be *Backend) plain(d []float32) {
	be.sweep(d, func(region, bool) fate { return toPlain })
}

// layoutOf returns d's layout: a region's when d is exactly one; a region
// it only partly covers is brought back to plain first.
func (be *Backend) layoutOf(d []float32) Layout {
	l := Plain
	be.sweep(d, func(r region, exact bool) fate {
		if exact {
			l = r.l
			return keep
		}
		return toPlain
	})
	return l
}

// output readies d to be overwritten whole by an op that then says its
// layout (setLayout): a region that is exactly d is forgotten (its
// contents do not matter), one that d only partly covers is brought back
// to plain (its other elements do).
func (be *Backend) output(d []float32) {
	be.sweep(d, func(_ region, exact bool) fate {
		if exact {
			return drop
		}
		return toPlain
	})
}

// forget forgets the regions in d, freed.
func (be *Backend) forget(d []float32) {
	be.sweep(d, func(region, bool) fate { return drop })
}

// setLayout records that d, just written whole, is in layout l.
func (be *Backend) setLayout(d []float32, l Layout) {
	if l == Plain || len(d) == 0 {
		return
	}
	be.lay.mu.Lock()
	defer be.lay.mu.Unlock()
	lo, hi := span(d)
	be.lay.regions = append(be.lay.regions, region{d: d, lo: lo, hi: hi, l: l})
	be.lay.n.Store(int32(len(be.lay.regions)))
}

// reorderInPlace reorders d from layout from to layout to, through the
// backend's scratch. It runs inside accessors that return no error: a
// library that fails here panics with a kernels.OpFailure, which the
// ops' callers recover as an error (kernels.RecoverOp); nothing sensible
// is left in d.
func (be *Backend) reorderInPlace(d []float32, from, to Layout) {
	if len(be.lay.scratch) < len(d) {
		be.lay.scratch = make([]float32, len(d))
	}
	s := be.lay.scratch[:len(d)]
	if err := be.lib.Reorder(s, d, from, to); err != nil {
		panic(kernels.OpFailure{Err: fmt.Errorf("cpu: %s: reordering %d floats from its layout %d back to %d: %w", be.lib.Name(), len(d), from, to, err)})
	}
	copy(d, s)
}

// unify brings ds (the operands of a per-element op) to one layout, which
// it returns: the first one's that is not plain, or plain where their
// lengths differ (the op then reports the mismatch).
func (be *Backend) unify(ds ...[]float32) Layout {
	if be.lay.n.Load() == 0 {
		return Plain
	}
	ls := make([]Layout, len(ds))
	to := Plain
	for i, d := range ds {
		ls[i] = be.layoutOf(d)
		if to == Plain {
			to = ls[i]
		}
		if len(d) != len(ds[0]) {
			to = Plain
			break
		}
	}
	for i, d := range ds {
		if to == Plain {
			be.plain(d)
			continue
		}
		if ls[i] == to || sameSpan(d, ds[:i]) {
			continue
		}
		if ls[i] != Plain {
			be.plain(d)
		}
		be.lay.mu.Lock()
		be.reorderInPlace(d, Plain, to)
		be.lay.mu.Unlock()
		be.setLayout(d, to)
	}
	return to
}

// partOverlap reports whether a and b share memory without being one
// span.
func partOverlap(a, b []float32) bool {
	alo, ahi := span(a)
	blo, bhi := span(b)
	return alo < bhi && blo < ahi && (alo != blo || ahi != bhi)
}

// sameSpan reports whether d is one of prev (an operand given twice).
func sameSpan(d []float32, prev [][]float32) bool {
	lo, hi := span(d)
	for _, p := range prev {
		if a, b := span(p); a == lo && b == hi {
			return true
		}
	}
	return false
}
