package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestFlagNamesCoverTrainer: every setting package trainer's validation
// names (bad("Field", …)) is worded as the flag that sets it, read off the
// flag set (flagtable.go): a new setting gets its flag's name in messages
// by being registered, and one registered without a flag fails here.
func TestFlagNamesCoverTrainer(t *testing.T) {
	// Named in messages that speak for themselves: the checkpoint settings
	// (their own wording, with flags), and the optimizer's settings as a
	// whole (its Validate's error names each one).
	whole := map[string]bool{"Checkpoint": true, "Opt": true}
	files, err := filepath.Glob("../../trainer/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("trainer's sources: %v", err)
	}
	re := regexp.MustCompile(`\bbad\("([A-Za-z.]+)"`)
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			field := string(m[1])
			seen++
			if _, ok := flagNames[field]; !ok && !whole[field] {
				t.Errorf("%s: bad(%q, …) names a setting no flag sets (or whose flag's Value holds no pointer to it)", filepath.Base(f), field)
			}
		}
	}
	if seen < 40 {
		t.Fatalf("found %d bad(…) calls in trainer: the scan is broken", seen)
	}
	for field, flag := range map[string]string{"Opt.LR": "--lr", "PS.StalenessHigh": "--staleness-range", "Straggle.Factor": "--straggle",
		"Hidden": "--hidden", "Opt.Kind": "--optimizer", "Overlap": "--overlap", "Net": "--model-file", "GPT.Heads": "--heads", "Data.SeqLen": "--seq-len"} {
		if flagNames[field] != flag {
			t.Errorf("%s is worded %q, want %s", field, flagNames[field], flag)
		}
	}
}
