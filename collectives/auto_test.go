package collectives_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/local"
)

// TestAutoChoice pins Auto's choice on both sides of every measured
// threshold (auto.go), and checks that it never asks for Native on a
// transport without one.
func TestAutoChoice(t *testing.T) {
	const (
		R = collectives.Ring
		T = collectives.Tree
		N = collectives.Native
	)
	K, M := 1<<10, 1<<20
	cases := []struct {
		ranks  int
		native bool
		bytes  []int
		want   []collectives.Algorithm
	}{
		{2, true, []int{4, 4 * K, 4*K + 4, 8 * K, 8*K + 4, 32 * K, 512 * K, 512*K + 4, 64 * M}, []collectives.Algorithm{N, N, T, T, N, N, N, R, R}},
		{2, false, []int{4, 64 * K, 64*K + 4, 64 * M}, []collectives.Algorithm{T, T, R, R}},
		{3, true, []int{4, 2 * M, 2*M + 4}, []collectives.Algorithm{N, N, R}},
		{3, false, []int{4, 64 * K, 64*K + 4}, []collectives.Algorithm{T, T, R}},
		{4, true, []int{4 * K, 8 * K, 32 * K, 64 * K, 4 * M, 4*M + 4}, []collectives.Algorithm{N, T, T, N, N, R}},
		{4, false, []int{4, 512 * K, 512*K + 4}, []collectives.Algorithm{T, T, R}},
		{6, true, []int{4 * K, 16 * K, 4 * M, 8 * M}, []collectives.Algorithm{N, N, N, R}},
		{8, true, []int{4 * K, 16 * K, 4 * M, 8 * M}, []collectives.Algorithm{N, T, N, R}},
		{8, false, []int{16 * K, 1 * M}, []collectives.Algorithm{T, R}},
	}
	for _, c := range cases {
		for i, b := range c.bytes {
			if got := collectives.AutoChoice(b, c.ranks, c.native); got != c.want[i] {
				t.Errorf("AutoChoice(%d bytes, %d ranks, native %v) = %s, want %s", b, c.ranks, c.native, got, c.want[i])
			}
		}
	}
	for ranks := 1; ranks <= 64; ranks++ {
		for b := 0; b <= 1<<30; b = 2*b + 4 {
			for _, native := range []bool{false, true} {
				got := collectives.AutoChoice(b, ranks, native)
				if got == collectives.Auto || got == "" || (!native && got == N) {
					t.Fatalf("AutoChoice(%d, %d, %v) = %q", b, ranks, native, got)
				}
			}
		}
	}
}

// TestAutoPicksPerSize runs Auto over the in-process transport at sizes on
// both sides of its thresholds, with different data per rank, and compares
// with the exact sum: lengths up to 128Ki+1 floats reach the Ring at every
// rank count (the conformance suite's longest length stays in Tree at 4).
func TestAutoPicksPerSize(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		for _, m := range []int{1, 1000, 16 << 10, 16<<10 + 1, 128 << 10, 128<<10 + 1} {
			t.Run(fmt.Sprintf("ranks=%d/len=%d", n, m), func(t *testing.T) {
				w := local.NewWorld(n)
				w.SetTimeout(30 * time.Second)
				errs := w.Run(func(c *local.Comm) error {
					buf := make([]float32, m)
					for i := range buf {
						buf[i] = float32((c.Rank()+1)*(i%13) - c.Rank())
					}
					if err := collectives.Allreduce(c, buf, collectives.Sum, collectives.Auto); err != nil {
						return err
					}
					for i, v := range buf {
						want := float32(n*(n+1)/2*(i%13) - n*(n-1)/2)
						if v != want {
							return fmt.Errorf("[%d] = %v, want %v", i, v, want)
						}
					}
					return nil
				})
				for r, err := range errs {
					if err != nil {
						t.Errorf("rank %d: %v", r, err)
					}
				}
			})
		}
	}
}
