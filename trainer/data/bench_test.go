package data

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

func BenchmarkLoadFashionMNIST(b *testing.B) {
	if _, err := os.Stat(DefaultFashionMNISTDir); err != nil {
		b.Skipf("Fashion-MNIST not installed at %s", DefaultFashionMNISTDir)
	}
	b.SetBytes(70000 * 785)
	for b.Loop() {
		if _, _, err := LoadFashionMNIST(""); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseIDXImages(b *testing.B) {
	for _, n := range []int{1000, 60000} {
		raw := encodeIDX(8, []int{n, 28, 28}, pattern(n*784))
		for _, gz := range []bool{false, true} {
			in := raw
			if gz {
				in = gzipBytes(b, raw)
			}
			b.Run(fmt.Sprintf("images=%d/gzip=%v", n, gz), func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				for b.Loop() {
					if _, err := ParseIDXImages(bytes.NewReader(in)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkSyntheticSparse(b *testing.B) {
	for _, rows := range []int{10_000, 100_000} {
		cfg := SyntheticSparseConfig{Rows: rows, Features: 1_000_000, NNZ: 50, Seed: 1}
		b.Run(fmt.Sprintf("rows=%d/features=1M/nnz=50", rows), func(b *testing.B) {
			b.SetBytes(int64(rows * 50 * 8))
			for b.Loop() {
				if _, err := SyntheticSparse(cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSynthetic(b *testing.B) {
	for _, rows := range []int{1000, 60000} {
		cfg := SyntheticConfig{Rows: rows, Cols: 784, Classes: 10, Noise: 1, Seed: 1}
		b.Run(fmt.Sprintf("rows=%d/cols=784", rows), func(b *testing.B) {
			b.SetBytes(int64(rows * 784 * 4))
			for b.Loop() {
				if _, err := Synthetic(cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseLIBSVM(b *testing.B) {
	for _, rows := range []int{1000, 20000} {
		s, err := SyntheticSparse(SyntheticSparseConfig{Rows: rows, Features: 100_000, NNZ: 50, Seed: 2})
		if err != nil {
			b.Fatal(err)
		}
		text := formatLIBSVM(s)
		b.Run(fmt.Sprintf("rows=%d/nnz=50", rows), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if _, err := ParseLIBSVM(strings.NewReader(text), LIBSVMOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkGather(b *testing.B) {
	d, err := Synthetic(SyntheticConfig{Rows: 10000, Cols: 784, Classes: 10, Noise: 1, Seed: 3})
	if err != nil {
		b.Fatal(err)
	}
	s, err := SyntheticSparse(SyntheticSparseConfig{Rows: 10000, Features: 1_000_000, NNZ: 50, Seed: 3})
	if err != nil {
		b.Fatal(err)
	}
	order := EpochOrder(10000, 3, 0, true)
	for _, batch := range []int{64, 1024} {
		idx := order[:batch]
		b.Run(fmt.Sprintf("dense/batch=%d", batch), func(b *testing.B) {
			x, y := make([]float32, batch*784), make([]int32, batch)
			b.SetBytes(int64(batch * 784 * 4))
			for b.Loop() {
				if err := d.Gather(x, y, idx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("sparse/batch=%d", batch), func(b *testing.B) {
			var dst Sparse
			b.SetBytes(int64(batch * 50 * 8))
			for b.Loop() {
				if err := s.Gather(&dst, idx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
