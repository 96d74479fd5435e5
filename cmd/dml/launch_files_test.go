package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestAttemptFilesExact (issue 29): the files an earlier launch's
// --timeline left are matched by name, not by a glob of the flag's text:
// 'run[1].json' must not take run1.json's attempts, nor '*' every file.
func TestAttemptFilesExact(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{
		"run[1].json.attempt-0.json", "run[1].json.attempt-12.json", "run[1].json.attempt-0.json.rank-3.json",
		"run1.json.attempt-0.json", "run[1].json.attempt-x.json", "run[1].json.attempt-.json", "other.attempt-1.json",
		"*.attempt-0.json", "a.attempt-0.json",
	} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	names := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		slices.Sort(out)
		return out
	}
	got := names(attemptFiles(filepath.Join(dir, "run[1].json")))
	want := []string{"run[1].json.attempt-0.json", "run[1].json.attempt-0.json.rank-3.json", "run[1].json.attempt-12.json"}
	if !slices.Equal(got, want) {
		t.Errorf("run[1].json: %v, want %v", got, want)
	}
	if got := names(attemptFiles(filepath.Join(dir, "*"))); !slices.Equal(got, []string{"*.attempt-0.json"}) {
		t.Errorf("*: %v, want only the file named *.attempt-0.json", got)
	}
	if got := attemptFiles(filepath.Join(dir, "missing", "x.json")); len(got) != 0 {
		t.Errorf("a missing folder: %v", got)
	}
}
