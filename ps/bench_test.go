package ps

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives/local"
)

// benchWorker runs servers and one worker on the local transport and times
// b.N iterations of step on the worker.
func benchWorker(b *testing.B, cfg Config, p int, step func(w *Worker) error) {
	cfg.Timeout = time.Minute
	world := local.NewWorld(cfg.Servers + 1)
	errs := world.Run(func(c *local.Comm) error {
		if c.Rank() < cfg.Servers {
			_, err := RunServer(c, cfg, make([]float32, p))
			return err
		}
		w, err := NewWorker(c, cfg, p)
		if err != nil {
			return err
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := step(w); err != nil {
				return err
			}
		}
		b.StopTimer()
		return w.Done()
	})
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
}

// BenchmarkPushPull is one dense Pull and one dense Push of the whole model
// per iteration; bytes are the float32 payload both ways (8 bytes a key).
// The baseline=transport rows are the local transport's ceiling: the same
// bytes sent to a peer and echoed back with SendBytes/RecvBytes, no ps.
func BenchmarkPushPull(b *testing.B) {
	for _, p := range []int{1 << 10, 1 << 16, 1 << 20} {
		b.Run(fmt.Sprintf("baseline=transport/keys=%d", p), func(b *testing.B) {
			b.SetBytes(int64(8 * p))
			world := local.NewWorld(2)
			world.SetTimeout(time.Minute)
			msg := make([]byte, 4*p)
			world.Run(func(c *local.Comm) error {
				if c.Rank() == 0 {
					for i := 0; i < b.N; i++ {
						m, _, _, err := c.RecvBytes(1, 1)
						if err != nil {
							return err
						}
						if err := c.SendBytes(m, 1, 2); err != nil {
							return err
						}
					}
					return nil
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := c.SendBytes(msg, 0, 1); err != nil {
						return err
					}
					if _, _, _, err := c.RecvBytes(0, 2); err != nil {
						return err
					}
				}
				b.StopTimer()
				return nil
			})
		})
	}
	for _, servers := range []int{1, 2} {
		for _, p := range []int{1 << 10, 1 << 16, 1 << 20} {
			for _, filters := range []string{"none", "fp16", "sigmod:0.9"} {
				b.Run(fmt.Sprintf("servers=%d/keys=%d/filters=%s", servers, p, filters), func(b *testing.B) {
					fs, err := ParseFilters(filters)
					if err != nil {
						b.Fatal(err)
					}
					model := make([]float32, p)
					grad := make([]float32, p)
					for i := range grad {
						grad[i] = float32(i%7) / 7 // sigmod:0.9 then sends about a third of the keys per push
					}
					b.SetBytes(int64(8 * p))
					benchWorker(b, Config{Servers: servers, Consistency: ASP, LR: 1e-6, Filters: fs}, p, func(w *Worker) error {
						if err := w.Pull(model); err != nil {
							return err
						}
						return w.Push(grad)
					})
				})
			}
		}
	}
}

// BenchmarkSparse pulls and pushes a sorted working set of keys from a
// model of 2^20 keys (sparse logistic regression's access pattern); bytes
// are 8 per key of the working set.
func BenchmarkSparse(b *testing.B) {
	const p = 1 << 20
	for _, servers := range []int{1, 2} {
		for _, n := range []int{100, 10000} {
			b.Run(fmt.Sprintf("servers=%d/keys=%d", servers, n), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 1))
				set := map[int64]bool{}
				for len(set) < n {
					set[int64(rng.IntN(p))] = true
				}
				keys := make([]int64, 0, n)
				for k := range set {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				vals := make([]float32, n)
				b.SetBytes(int64(8 * n))
				benchWorker(b, Config{Servers: servers, Consistency: ASP, LR: 1e-6}, p, func(w *Worker) error {
					if err := w.PullKeys(keys, vals); err != nil {
						return err
					}
					return w.PushKeys(keys, vals)
				})
			})
		}
	}
}

// BenchmarkCodec encodes and decodes a push of 2^20 values.
func BenchmarkCodec(b *testing.B) {
	const n = 1 << 20
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(i) / n
	}
	out := make([]float32, n)
	for _, enc := range []Encoding{Float32, Float16, BFloat16} {
		b.Run(enc.String(), func(b *testing.B) {
			b.SetBytes(4 * n)
			var buf []byte
			for i := 0; i < b.N; i++ {
				buf = appendPushRange(buf[:0], 0, enc, 0, vals)
				m, err := decode(buf)
				if err != nil {
					b.Fatal(err)
				}
				m.floatsInto(out)
			}
		})
	}
}
