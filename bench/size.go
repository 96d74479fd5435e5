// Package bench measures dml: AllReduce tables in the style of nccl-tests
// (size, count, time, algbw, busbw, #wrong) and, later, training sweeps.
// It runs against collectives.Comm, so the same code measures the MPI
// transport under mpirun and the in-process one in tests.
package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a byte count such as 4096, 4K, 16M or 1G (powers of 1024,
// case-insensitive, an optional trailing B). It must be positive.
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "B")
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		}
		if mult != 1 {
			t = t[:len(t)-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: want a number of bytes such as 4096, 4K, 16M or 1G", s)
	}
	if v <= 0 {
		return 0, fmt.Errorf("size %q: must be greater than 0", s)
	}
	if v > (1<<62)/mult {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return v * mult, nil
}

// FormatSize writes bytes the way ParseSize reads them, for labels.
func FormatSize(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dG", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%dM", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%dK", b>>10)
	}
	return strconv.FormatInt(b, 10)
}
