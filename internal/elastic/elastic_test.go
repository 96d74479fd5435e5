package elastic

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSlotPool: a failed slot of this machine is gone for good; a failed
// host is out for the cool-down, then back; --max-np caps the world; a
// rank's host is found by the slots in order, or by the name the ring
// reported where it is one of the pool's.
func TestSlotPool(t *testing.T) {
	p := New(Config{Hosts: []Host{{"vm", 3}}, Local: true}).pool
	now := time.Unix(1000, 0)
	if w, n := p.world(now, 0); n != 3 || len(w) != 1 {
		t.Fatalf("--np 3: world %v, %d ranks", w, n)
	}
	p.fail(p.hostOf(nil, 2, "vm"), now)
	if _, n := p.world(now.Add(time.Hour), 0); n != 2 {
		t.Errorf("--np 3, one slot failed: %d ranks, want 2 (for good)", n)
	}

	hosts, err := ParseHosts("h1:2,h2:2,h3:1")
	if err != nil {
		t.Fatal(err)
	}
	p = New(Config{Hosts: hosts, Cooldown: time.Minute}).pool
	w, n := p.world(now, 0)
	if n != 5 {
		t.Fatalf("world %v, %d ranks", w, n)
	}
	for rank, want := range []string{"h1", "h1", "h2", "h2", "h3"} {
		if got := p.hostOf(w, rank, "elsewhere"); got != want {
			t.Errorf("rank %d on %s, want %s", rank, got, want)
		}
	}
	if got := p.hostOf(w, 0, "h3"); got != "h3" {
		t.Errorf("the ring's h3 for rank 0: %s", got)
	}
	p.fail("h2", now)
	if w, n := p.world(now.Add(30*time.Second), 0); n != 3 || slices.ContainsFunc(w, func(h Host) bool { return h.Name == "h2" }) {
		t.Errorf("h2 in its cool-down: world %v, %d ranks", w, n)
	}
	if w, n := p.world(now.Add(2*time.Minute), 4); n != 4 || len(w) != 2 || w[1] != (Host{"h2", 2}) {
		t.Errorf("after the cool-down, --max-np 4: world %v, %d ranks", w, n)
	}
}

// TestDiscoverHosts: what a discovery command prints, and what it may not.
func TestDiscoverHosts(t *testing.T) {
	got, err := DiscoverHosts("printf 'a:2\\n# comment\\n\\n  b  # one slot\\n'")
	if err != nil || !slices.Equal(got, []Host{{"a", 2}, {"b", 1}}) {
		t.Errorf("got %v, %v", got, err)
	}
	for _, c := range []struct{ cmd, want string }{
		{"exit 3", "exit status 3"},
		{"echo broken >&2; exit 1", "exit status 1: broken"},
		{"true", "printed no host"},
		{"echo 'a b'", `line 1 "a b": want host or host:slots`},
		{"printf 'a\\na:2\\n'", "host a is given twice"},
		{"echo a:x", `slots "x"`},
	} {
		if _, err := DiscoverHosts(c.cmd); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.cmd, err, c.want)
		}
	}
}

// TestDiscoveryBounded (issue 29): a discovery command that prints without
// end is cut at maxDiscoveryBytes and refused, one that prints no host
// name (NUL bytes, symbols) is refused naming the line, and a good one
// still works.
func TestDiscoveryBounded(t *testing.T) {
	for _, c := range []struct{ cmd, want string }{
		{"yes localhost", "printed more than"},
		{"head -c 1000 /dev/zero", "not a host name"},
		{"echo 'bad_host!'", "not a host name"},
		{"echo '-dash'", "not a host name"},
	} {
		if _, err := DiscoverHosts(c.cmd); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.cmd, err, c.want)
		}
	}
	hosts, err := DiscoverHosts("printf 'node-1:2\\n# a comment\\n10.0.0.7\\nn2.example.org:4\\n'")
	if err != nil || len(hosts) != 3 || hosts[0].Slots != 2 || hosts[1].Name != "10.0.0.7" || hosts[2].Slots != 4 {
		t.Errorf("good hosts: %+v, %v", hosts, err)
	}
}

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

// TestStepsLostFromSurvivors (issue 29): the steps lost count from where
// the survivors had come, not from the dead rank's last record, which may
// be older than the checkpoint the job resumes from.
func TestStepsLostFromSurvivors(t *testing.T) {
	var errb strings.Builder
	sv := New(Config{Stderr: &errb})
	t0 := time.Now()
	prev := &attempt{Ranks: 3, Emergency: -1, ResumedSteps: 0, start: t0,
		Death: &deathEvent{Rank: 2, Host: "h3", Step: 662, FinderStep: 760}, death: t0.Add(time.Second)}
	next := &attempt{Ranks: 2, ResumedSteps: 700, firstStep: t0.Add(2 * time.Second)}
	sv.attempts = []*attempt{prev, next}
	sv.restarted(prev, next)
	if prev.StepsLost != 60 || !strings.Contains(errb.String(), "died in step 760 (last heard of in step 662)") || !strings.Contains(errb.String(), "60 step(s) lost") {
		t.Errorf("lost %d: %s", prev.StepsLost, errb.String())
	}
}
