package main

import (
	"slices"
	"strings"
	"testing"
)

// TestTrainArgs: dml launch reads the training command as dml train
// parses it (a bool flag alone or with its value after a space, --resume
// alone or with a file, a value after = or a space), changes flags
// through it, and re-emits a line that parses to the same flags.
func TestTrainArgs(t *testing.T) {
	line := strings.Fields("--checkpoint-dir ck -emergency-checkpoint=false --shuffle --overlap auto --resume ck/a.npz --epochs 3 --lr=0.1 --epochs 4")
	ta, err := parseTrainArgs(line)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want string
		ok         bool
	}{{"checkpoint-dir", "ck", true}, {"emergency-checkpoint", "false", true}, {"shuffle", "true", true}, {"overlap", "auto", true},
		{"resume", "ck/a.npz", true}, {"epochs", "4", true}, {"lr", "0.1", true}, {"seed", "", false}} {
		if v, ok := ta.value(c.name); v != c.want || ok != c.ok {
			t.Errorf("%s: %q %v, want %q %v", c.name, v, ok, c.want, c.ok)
		}
	}
	if ta.cfg.Epochs != 4 || ta.cfg.Opt.LR != 0.1 {
		t.Errorf("the config as train sees it: epochs %d, lr %v", ta.cfg.Epochs, ta.cfg.Opt.LR)
	}
	// A restart: the first run's --resume FILE gives way to --resume.
	re := ta.with("resume", "true").with("timeline", "tl.attempt-1.json")
	got := re.args()
	want := "train --checkpoint-dir=ck --emergency-checkpoint=false --shuffle=true --overlap=auto --epochs=3 --lr=0.1 --epochs=4 --resume=true --timeline=tl.attempt-1.json"
	if strings.Join(got, " ") != want {
		t.Errorf("re-emitted:\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
	back, err := parseTrainArgs(got[1:])
	if err != nil || !slices.Equal(back.args(), got) || !back.cfg.Shuffle {
		t.Errorf("the re-emitted line parses to %v, %v", back.args(), err)
	}
	if v, _ := ta.value("resume"); v != "ck/a.npz" {
		t.Errorf("with changed the original: resume %q", v)
	}
	if ta.without("epochs").has("epochs") {
		t.Error("without kept the flag")
	}
}
