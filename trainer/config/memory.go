package config

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// AvailableMemory is the memory this process may still allocate, in
// bytes: /proc/meminfo's MemAvailable, lowered to what the memory cgroup
// leaves (v2 memory.max − memory.current, or v1 limit_in_bytes −
// usage_in_bytes) where one is set. ok is false where none can be read
// (not Linux): then nothing can be checked.
func AvailableMemory() (bytes int64, ok bool) {
	bytes = -1
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, found := strings.CutPrefix(sc.Text(), "MemAvailable:"); found {
				kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
				if err == nil {
					bytes = kb << 10
				}
			}
		}
		f.Close()
	}
	for _, cg := range [][2]string{
		{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
		{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"},
	} {
		limit, err1 := readInt(cg[0]) // "max" (unlimited) fails to parse
		used, err2 := readInt(cg[1])
		if err1 == nil && err2 == nil && limit < 1<<60 {
			if left := max(0, limit-used); bytes < 0 || left < bytes {
				bytes = left
			}
			break
		}
	}
	return bytes, bytes >= 0
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// tooBigError is a job that cannot fit in memory: every rank with the same
// memory finds it alike, so it is a usage error (exit 2).
type tooBigError struct{ msg string }

func (e *tooBigError) Error() string { return e.msg }
func (e *tooBigError) Unwrap() error { return ErrUsage }

// TooBig is a job that cannot fit in memory: a usage error saying so.
func TooBig(format string, args ...any) error {
	return &tooBigError{fmt.Sprintf(format, args...)}
}

// GB formats bytes for a person.
func GB(b float64) string {
	switch {
	case b >= 1e12:
		return fmt.Sprintf("%.1f TB", b/1e12)
	case b >= 1e9:
		return fmt.Sprintf("%.1f GB", b/1e9)
	}
	return fmt.Sprintf("%.0f MB", b/1e6)
}

// CheckMemory refuses what (need bytes on each rank) when it is more than
// limit (0: no limit), a usage error naming the sizes, where the limit came
// from (source) and the fix. The trainer, its data loaders and the
// benches all refuse through it.
func CheckMemory(limit int64, source, what string, need float64, fix string) error {
	if limit <= 0 || need <= float64(limit) {
		return nil
	}
	if source != "DML_MEMORY_LIMIT" {
		source += "; DML_MEMORY_LIMIT overrides"
	}
	return &tooBigError{fmt.Sprintf("%s needs about %s on each rank, but %s are available to it (%s): %s",
		what, GB(need), GB(float64(limit)), source, fix)}
}

// MemoryCheck refuses what would need more memory than a rank may use
// (CheckMemory with the rank's limit); nil checks nothing.
type MemoryCheck func(what string, need float64) error
