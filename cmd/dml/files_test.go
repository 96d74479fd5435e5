package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSaveTargetCheckedFirst: an unusable --save or --metrics target is
// refused at start-up with exit 2, not after the training (the bug: a folder
// as the target was noticed only when the final weights were written).
func TestSaveTargetCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	// Enough epochs that a run reaching the training would take minutes.
	long := []string{"train", "--data", "synthetic", "--samples", "200000", "--epochs", "1000", "--hidden", "256"}
	for _, tc := range []struct{ flag, path, want string }{
		{"--save", dir, "--save: " + dir + " is a folder, not a file"},
		{"--metrics", dir, "--metrics: " + dir + " is a folder, not a file"},
		{"--save", filepath.Join(file, "w.npz"), file + " is not a folder"},
	} {
		start := time.Now()
		r := dml(t, 0, append(long, tc.flag, tc.path)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || time.Since(start) > 30*time.Second {
			t.Errorf("%s %s: exit %d after %v, stderr %q; want exit 2 at once and %q", tc.flag, tc.path, r.code, time.Since(start), r.stderr, tc.want)
		}
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		os.Mkdir(ro, 0o555)
		r := dml(t, 0, append(long, "--save", filepath.Join(ro, "w.npz"))...)
		if r.code != 2 || !strings.Contains(r.stderr, "cannot create a file in "+ro) {
			t.Errorf("read-only folder: exit %d, stderr %q", r.code, r.stderr)
		}
	}
}
