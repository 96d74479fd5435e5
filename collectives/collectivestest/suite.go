// Package collectivestest is the conformance suite for collectives.Comm
// transports and the algorithms written on them. Every rank of a world calls
// Run with its own Comm; each check gives every rank different input (never
// all ones), compares with a plain reference computed from the same formula,
// and covers length 0, lengths below the rank count, lengths not divisible
// by it, and segment sizes that force the ring to pipeline.
package collectivestest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/dml-project/dml/collectives"
)

// Lengths returns the buffer lengths the suite tries for n ranks.
func Lengths(n int) []int {
	ls := []int{0, 1, 2, 3, n - 1, n, n + 1, 2*n + 1, 7, 31, 100, 1000, 4099, 65537}
	seen := map[int]bool{}
	var out []int
	for _, l := range ls {
		if l >= 0 && !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

// value is rank r's element i: small integers, so that sums are exact in
// any order and the expected result is known without rounding questions.
func value(r, i int) float32 { return float32((r+1)*(i%251) - 3*r + i%7) }

// Run runs every check on this rank and returns the first failure. algos are
// the AllReduce algorithms to test (Native only where the transport has one).
func Run(c collectives.Comm, algos []collectives.Algorithm) error {
	checks := []struct {
		name string
		fn   func(collectives.Comm, []collectives.Algorithm) error
	}{
		{"allreduce exact", checkAllreduceExact},
		{"allreduce identical bits", checkAllreduceIdentical},
		{"allreduce on 16-bit wires", checkAllreduceWire},
		{"allreduce length mismatch", checkLengthMismatch},
		{"broadcast", checkBroadcast},
		{"allgather", checkAllgather},
	}
	for _, ch := range checks {
		if err := ch.fn(c, algos); err != nil {
			return fmt.Errorf("rank %d of %d: %s: %w", c.Rank(), c.Size(), ch.name, err)
		}
		if err := c.Barrier(); err != nil {
			return fmt.Errorf("rank %d: barrier after %s: %w", c.Rank(), ch.name, err)
		}
	}
	return nil
}

func checkAllreduceExact(c collectives.Comm, algos []collectives.Algorithm) error {
	n, r := c.Size(), c.Rank()
	for _, algo := range algos {
		for _, segBytes := range []int{12, 4096, 0} {
			ar := &collectives.Allreducer{Comm: c, Algorithm: algo, SegmentBytes: segBytes}
			for _, l := range Lengths(n) {
				if segBytes == 12 && l > 1000 {
					continue // tiny segments on big buffers only add time
				}
				for _, op := range []collectives.Op{collectives.Sum, collectives.Avg} {
					buf := make([]float32, l)
					for i := range buf {
						buf[i] = value(r, i)
					}
					if err := ar.Allreduce(buf, op); err != nil {
						return fmt.Errorf("%s len %d seg %dB %v: %w", algo, l, segBytes, op, err)
					}
					for i, got := range buf {
						var want float64
						for q := 0; q < n; q++ {
							want += float64(value(q, i))
						}
						if op == collectives.Avg {
							want /= float64(n)
						}
						if math.Abs(float64(got)-want) > 1e-6*math.Max(1, math.Abs(want)) {
							return fmt.Errorf("%s len %d seg %dB %v: element %d = %v, want %v", algo, l, segBytes, op, i, got, want)
						}
					}
				}
				if algo != collectives.Ring && segBytes != 0 {
					break // segments only matter to the ring
				}
			}
		}
	}
	return nil
}

// checkAllreduceIdentical reduces random floats (sums not exact) and checks
// that every rank holds the same bits and is close to a float64 reference.
func checkAllreduceIdentical(c collectives.Comm, algos []collectives.Algorithm) error {
	n, r := c.Size(), c.Rank()
	const l = 10007
	gen := func(q int) []float32 {
		rng := rand.New(rand.NewPCG(uint64(q), 42))
		v := make([]float32, l)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	ref := make([]float64, l)
	for q := 0; q < n; q++ {
		for i, x := range gen(q) {
			ref[i] += float64(x)
		}
	}
	for _, algo := range algos {
		buf := gen(r)
		ar := &collectives.Allreducer{Comm: c, Algorithm: algo, SegmentBytes: 4000}
		if err := ar.Allreduce(buf, collectives.Sum); err != nil {
			return fmt.Errorf("%s: %w", algo, err)
		}
		for i, x := range buf {
			if math.Abs(float64(x)-ref[i]) > 1e-5*float64(n)*math.Max(1, math.Abs(ref[i])) {
				return fmt.Errorf("%s: element %d = %v, float64 reference %v", algo, i, x, ref[i])
			}
		}
		if err := sameOnEveryRank(c, buf); err != nil {
			return fmt.Errorf("%s: %w", algo, err)
		}
	}
	return nil
}

// checkLengthMismatch gives the last rank one element more; the ring's check
// must fail on every rank and name that rank.
func checkLengthMismatch(c collectives.Comm, _ []collectives.Algorithm) error {
	n, r := c.Size(), c.Rank()
	if n == 1 {
		return nil
	}
	l := 100
	if r == n-1 {
		l++
	}
	err := collectives.Allreduce(c, make([]float32, l), collectives.Sum, collectives.Ring)
	if !errors.Is(err, collectives.ErrLengthMismatch) {
		return fmt.Errorf("got %v, want ErrLengthMismatch", err)
	}
	if want := fmt.Sprintf("rank %d: 101", n-1); !strings.Contains(err.Error(), want) {
		return fmt.Errorf("error %q does not name %q", err, want)
	}
	return nil
}

func checkBroadcast(c collectives.Comm, _ []collectives.Algorithm) error {
	n, r := c.Size(), c.Rank()
	for root := 0; root < n; root++ {
		for _, l := range []int{0, 1, n + 1, 1000} {
			buf := make([]float32, l)
			for i := range buf {
				buf[i] = value(r, i)
			}
			if err := collectives.Broadcast(c, buf, root); err != nil {
				return fmt.Errorf("root %d len %d: %w", root, l, err)
			}
			for i, got := range buf {
				if got != value(root, i) {
					return fmt.Errorf("root %d len %d: element %d = %v, want %v", root, l, i, got, value(root, i))
				}
			}
		}
	}
	if err := collectives.Broadcast(c, nil, n); !errors.Is(err, collectives.ErrBadRank) {
		return fmt.Errorf("root %d: got %v, want ErrBadRank", n, err)
	}
	return nil
}

func checkAllgather(c collectives.Comm, _ []collectives.Algorithm) error {
	n, r := c.Size(), c.Rank()
	for _, m := range []int{0, 1, 3, 257} {
		send := make([]float32, m)
		for i := range send {
			send[i] = value(r, i)
		}
		recv := make([]float32, n*m)
		if err := collectives.Allgather(c, send, recv); err != nil {
			return fmt.Errorf("block %d: %w", m, err)
		}
		for q := 0; q < n; q++ {
			for i := 0; i < m; i++ {
				if got := recv[q*m+i]; got != value(q, i) {
					return fmt.Errorf("block %d: rank %d element %d = %v, want %v", m, q, i, got, value(q, i))
				}
			}
		}
	}
	return nil
}

// checkAllreduceWire runs the ring on fp16 and bf16 messages (Allreducer.Wire,
// with Auto, which must pick the ring):
//   - small integers, whose every partial sum both formats hold, come out
//     exact, with and without Scale, for Sum and Avg over the suite's lengths
//     and segment sizes, with an exact tail of 0 to 3 elements;
//   - random floats come out with the same bits on every rank, within the
//     rounding the wire allows (a few half-ulps of Σ|x|), and the exact
//     tail, values no 16-bit format holds, within float32 rounding.
func checkAllreduceWire(c collectives.Comm, _ []collectives.Algorithm) error {
	n, r := c.Size(), c.Rank()
	small := func(q, i int) float32 { return float32((q+1)*(i%5) - q) }
	for _, w := range []collectives.Wire{collectives.WireF16, collectives.WireBF16} {
		for _, segBytes := range []int{12, 0} {
			for _, l := range Lengths(n) {
				if segBytes == 12 && l > 1000 {
					continue
				}
				tail := l % 4
				for _, op := range []collectives.Op{collectives.Sum, collectives.Avg} {
					ar := &collectives.Allreducer{Comm: c, SegmentBytes: segBytes, Wire: w, Scale: 4, ExactTail: tail, SkipLengthCheck: l%2 == 1}
					buf := make([]float32, l)
					for i := range buf {
						buf[i] = small(r, i)
					}
					if err := ar.Allreduce(buf, op); err != nil {
						return fmt.Errorf("%v len %d seg %dB %v: %w", w, l, segBytes, op, err)
					}
					for i, got := range buf {
						var want float64
						for q := 0; q < n; q++ {
							want += float64(small(q, i))
						}
						if op == collectives.Avg {
							// The mean is rounded to the wire too (outside the tail).
							want = float64(float32(want) * (1 / float32(n)))
							if i < l-tail {
								want = roundWire(w, want)
							}
						}
						if float32(want) != got {
							return fmt.Errorf("%v len %d seg %dB %v tail %d: element %d = %v, want %v", w, l, segBytes, op, tail, i, got, want)
						}
					}
				}
			}
		}
		// Random values: identical bits, bounded error, an exact tail.
		const l, tail = 10007, 3
		gen := func(q int) []float32 {
			rng := rand.New(rand.NewPCG(uint64(q), 7))
			v := make([]float32, l)
			for i := range v {
				v[i] = float32(rng.NormFloat64()) * 1e-3
			}
			for i := l - tail; i < l; i++ {
				v[i] = 0.1*float32(q+1) + float32(i)/3
			}
			return v
		}
		ref, abs := make([]float64, l), make([]float64, l)
		for q := 0; q < n; q++ {
			for i, x := range gen(q) {
				ref[i] += float64(x)
				abs[i] += math.Abs(float64(x))
			}
		}
		ulp := math.Ldexp(1, -11) // fp16: 11 bits of precision
		if w == collectives.WireBF16 {
			ulp = math.Ldexp(1, -8)
		}
		buf := gen(r)
		ar := &collectives.Allreducer{Comm: c, SegmentBytes: 4000, Wire: w, Scale: 1024, ExactTail: tail}
		if err := ar.Allreduce(buf, collectives.Sum); err != nil {
			return fmt.Errorf("%v random: %w", w, err)
		}
		for i, x := range buf {
			tol := float64(n+1) * ulp * abs[i]
			if i >= l-tail {
				tol = 1e-6 * abs[i]
			}
			if math.Abs(float64(x)-ref[i]) > tol {
				return fmt.Errorf("%v random: element %d = %v, float64 reference %v (tolerance %.3g)", w, i, x, ref[i], tol)
			}
		}
		if err := sameOnEveryRank(c, buf); err != nil {
			return fmt.Errorf("%v random: %w", w, err)
		}
	}
	return nil
}

// sameOnEveryRank compares a hash of buf's bits across the ranks.
func sameOnEveryRank(c collectives.Comm, buf []float32) error {
	var h uint64 = 14695981039346656037
	for _, x := range buf {
		h = (h ^ uint64(math.Float32bits(x))) * 1099511628211
	}
	mine := []float32{math.Float32frombits(uint32(h >> 32)), math.Float32frombits(uint32(h))}
	all := make([]float32, 2*c.Size())
	if err := collectives.Allgather(c, mine, all); err != nil {
		return err
	}
	for q := range c.Size() {
		if math.Float32bits(all[2*q]) != math.Float32bits(mine[0]) || math.Float32bits(all[2*q+1]) != math.Float32bits(mine[1]) {
			return fmt.Errorf("rank %d's result differs bitwise from rank %d's", q, c.Rank())
		}
	}
	return nil
}

// roundWire rounds x to w's precision (Scale 4: a power of two, so the
// same as without).
func roundWire(w collectives.Wire, x float64) float64 {
	v := []float32{float32(x)}
	collectives.Round(w, v, 4)
	return float64(v[0])
}
