package main

import (
	"slices"
	"strings"
	"testing"
)

// TestBenchPSUsage: bad `dml bench ps` input ends with one clear line and
// exit 2, alone and under mpirun (more servers than ranks − 1).
func TestBenchPSUsage(t *testing.T) {
	for _, tc := range []struct {
		np   int
		args []string
		want string
	}{
		{0, []string{"--params", "0"}, "--params 0: the model needs at least 1 key"},
		{0, []string{"--keys", "0", "--of", "10"}, "--keys 0"},
		{0, []string{"--keys", "20", "--of", "10"}, "--keys 20 is beyond the model"},
		{0, []string{"--keys", "5"}, "needs both --keys K and --of N"},
		{0, []string{"--params", "5", "--keys", "2", "--of", "4"}, "not both"},
		{0, []string{"--filters", "gzip"}, `unknown filter "gzip"`},
		{0, []string{"--consistency", "bulk"}, `unknown consistency "bulk"`},
		{0, []string{"--models", "bulk"}, `unknown consistency "bulk"`}, // the old spelling
		{0, []string{"--models", "bsp", "--consistency", "asp"}, "give --consistency, not also --models (its old name)"},
		{0, []string{"--staleness-range", "x"}, `invalid value "x" for flag -staleness-range`},
		{0, []string{"--format", "xml"}, `unknown format "xml"`},
		{0, []string{"--replicate-every", "1,x"}, `--replicate-every "1,x": want 0 (none) or positive counts`},
		{0, []string{"--optimizer", "lbfgs"}, `lbfgs`},
		{0, []string{"--params", "1000"}, "--servers 1 in a job of 1 ranks: at most 0"},
		{2, []string{"--params", "1000", "--servers", "2"}, "--servers 2 in a job of 2 ranks: at most 1"},
	} {
		r := dml(t, tc.np, append([]string{"bench", "ps"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("np %d, dml bench ps %s: exit %d, stderr %q; want exit 2 and %q", tc.np, strings.Join(tc.args, " "), r.code, r.stderr, tc.want)
		}
	}
}

// TestBenchPSRuns: a short dense and sparse run under mpirun -np 3 prints
// one csv row per model.
func TestBenchPSRuns(t *testing.T) {
	for _, args := range [][]string{
		{"--params", "5000", "-n", "5", "-w", "1", "--consistency", "bsp,asp", "--format", "csv"},
		{"--keys", "100", "--of", "10000", "-n", "5", "-w", "1", "--models", "bsp,asp", "--fused", "--format", "csv", "--staleness-low", "1"}, // old spellings
		{"--keys", "100", "--of", "10000", "-n", "5", "-w", "1", "--consistency", "bsp,dssp", "--staleness-range", "1,3", "--format", "csv"},
	} {
		r := dml(t, 3, append([]string{"bench", "ps"}, args...)...)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		old := slices.Contains(args, "--models")
		if r.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "workload,consistency") ||
			old != strings.Contains(r.stderr, "--models is deprecated: use --consistency") {
			t.Errorf("dml bench ps %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
}
