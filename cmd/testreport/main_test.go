package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// feed runs events through a report and returns its output and the number
// of required skips.
func feed(t *testing.T, required string, evs ...event) (string, *report, int) {
	t.Helper()
	var out bytes.Buffer
	r := newReport(&out)
	for _, e := range evs {
		// Round-trip through JSON as go test would write it.
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var back event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		r.add(back)
	}
	var re *regexp.Regexp
	if required != "" {
		re = regexp.MustCompile(required)
	}
	bad := r.summary(re)
	return out.String(), r, bad
}

func TestSkipsListedWithReason(t *testing.T) {
	out, r, bad := feed(t, "mpirun|numpy",
		event{Action: "run", Package: "p", Test: "TestA"},
		event{Action: "output", Package: "p", Test: "TestA", Output: "=== RUN   TestA\n"},
		event{Action: "output", Package: "p", Test: "TestA", Output: "    a_test.go:9: no python3 with numpy\n"},
		event{Action: "output", Package: "p", Test: "TestA", Output: "--- SKIP: TestA (0.00s)\n"},
		event{Action: "skip", Package: "p", Test: "TestA"},
		event{Action: "run", Package: "p", Test: "TestB"},
		event{Action: "pass", Package: "p", Test: "TestB"},
		event{Action: "output", Package: "p", Output: "ok  \tp\t0.1s\n"},
		event{Action: "pass", Package: "p"},
	)
	if r.passed != 1 || len(r.skips) != 1 {
		t.Fatalf("passed %d skips %d, want 1 and 1", r.passed, len(r.skips))
	}
	if bad != 1 || !strings.Contains(out, "REQUIRED") {
		t.Errorf("a numpy skip must count as required:\n%s", out)
	}
	for _, want := range []string{"ok  \tp\t0.1s", "p TestA:", "numpy", "1 passed, 0 failed, 1 skipped"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestOptionalSkipAndFailureOutput(t *testing.T) {
	out, r, bad := feed(t, "mpirun",
		event{Action: "output", Package: "q", Test: "TestGPU", Output: "    gpu_test.go:3: no CUDA device\n"},
		event{Action: "skip", Package: "q", Test: "TestGPU"},
		event{Action: "output", Package: "q", Test: "TestBad", Output: "    bad_test.go:7: got 1, want 2\n"},
		event{Action: "fail", Package: "q", Test: "TestBad"},
		event{Action: "output", Package: "q", Output: "FAIL\tq\t0.2s\n"},
		event{Action: "fail", Package: "q"},
	)
	if bad != 0 {
		t.Errorf("a GPU skip is allowed, got %d required", bad)
	}
	if r.failed != 1 || r.pkgFails != 1 {
		t.Errorf("failed %d pkgFails %d, want 1 and 1", r.failed, r.pkgFails)
	}
	for _, want := range []string{"got 1, want 2", "FAIL\tq", "no CUDA device", "0 passed, 1 failed, 1 skipped"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
