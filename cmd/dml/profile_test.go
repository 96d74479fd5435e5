package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// timelineEvent is what the tests read of a Chrome trace event.
type timelineEvent struct {
	Name string           `json:"name"`
	Cat  string           `json:"cat"`
	Ph   string           `json:"ph"`
	Ts   float64          `json:"ts"`
	Dur  float64          `json:"dur"`
	Pid  int              `json:"pid"`
	Tid  int              `json:"tid"`
	Args map[string]int64 `json:"args"`
}

func readTimeline(t *testing.T, path string) []timelineEvent {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		TraceEvents []json.RawMessage `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s is not JSON: %v", path, err)
	}
	var spans []timelineEvent
	for _, raw := range f.TraceEvents {
		var e timelineEvent
		if json.Unmarshal(raw, &e) != nil || e.Ph != "X" {
			continue // metadata events have string args
		}
		spans = append(spans, e)
	}
	return spans
}

// checkProfiles parses every rank's pprof file in dir.
func checkProfiles(t *testing.T, dir, mode string, ranks int) {
	t.Helper()
	for r := range ranks {
		path := filepath.Join(dir, "rank-"+strconv.Itoa(r)+"."+mode+".pprof")
		f, err := os.Open(path)
		if err != nil {
			t.Errorf("rank %d wrote no profile: %v", r, err)
			continue
		}
		p, err := profile.Parse(f)
		f.Close()
		if err != nil {
			t.Errorf("%s: not a pprof profile: %v", path, err)
			continue
		}
		if len(p.SampleType) == 0 {
			t.Errorf("%s: a profile without sample types", path)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".rank-*"))
	if len(left) > 0 {
		t.Errorf("pkg/profile's folders left behind: %v", left)
	}
}

// TestTimelineAndProfileUnderMPI: `dml train --timeline t.json --profile
// cpu --profile-dir p` under mpirun -np 2 with the AllReduce overlapped in
// small buckets: rank 0 writes one trace with the step spans of both ranks
// on their step loops and the buckets' AllReduce on their communication
// lanes, some of it under the backward pass; each rank writes a CPU
// profile that pprof parses.
func TestTimelineAndProfileUnderMPI(t *testing.T) {
	dir := t.TempDir()
	tl, pd := filepath.Join(dir, "t.json"), filepath.Join(dir, "p")
	r := dml(t, 2, "train", "--data", "synthetic", "--samples", "4000", "--epochs", "1", "--batch", "64",
		"--hidden", "512,256", "--overlap=true", "--bucket-mb", "0.1",
		"--timeline", tl, "--profile", "cpu", "--profile-dir", pd)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	spans := readTimeline(t, tl)
	count := map[[3]any]int{}
	for _, e := range spans {
		count[[3]any{e.Pid, e.Tid, e.Name}]++
	}
	for rank := range 2 {
		for _, name := range []string{"step", "forward", "backward", "update", "batch"} {
			if count[[3]any{rank, 0, name}] == 0 {
				t.Errorf("rank %d: no %q span on its step loop", rank, name)
			}
		}
		if count[[3]any{rank, 1, "allreduce"}] == 0 {
			t.Errorf("rank %d: no bucket allreduce on its communication lane", rank)
		}
	}
	// Some bucket's AllReduce starts before the backward pass around it ends.
	under := 0
	for _, b := range spans {
		if b.Name != "backward" {
			continue
		}
		for _, a := range spans {
			if a.Name == "allreduce" && a.Pid == b.Pid && a.Ts >= b.Ts && a.Ts < b.Ts+b.Dur {
				under++
			}
		}
	}
	if under == 0 {
		t.Error("no AllReduce started under a backward pass")
	}
	checkProfiles(t, pd, "cpu", 2)
}

// TestTimelinePSUnderMPI: one server and two SSP workers; the workers'
// pulls carry their clock, staleness and hold, and the server's messages
// are on its server lane. Then BSP with a straggler: the others wait.
func TestTimelinePSUnderMPI(t *testing.T) {
	tl := filepath.Join(t.TempDir(), "t.json")
	r := dml(t, 3, "train", "--data", "synthetic", "--samples", "2000", "--epochs", "1",
		"--sync", "ps", "--consistency", "ssp", "--staleness", "2", "--timeline", tl)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	pulls, server := map[int]int{}, 0
	for _, e := range readTimeline(t, tl) {
		switch {
		case e.Name == "pull":
			_, c := e.Args["clock"]
			_, s := e.Args["staleness"]
			_, h := e.Args["held_us"]
			if !c || !s || !h {
				t.Errorf("pull without clock, staleness and held_us: %+v", e)
			}
			pulls[e.Pid]++
		case e.Pid == 0 && e.Tid == 2 && e.Name == "SendBytes":
			server++
		}
	}
	if pulls[1] == 0 || pulls[2] == 0 || pulls[0] != 0 {
		t.Errorf("pulls per rank %v, want some from workers 1 and 2", pulls)
	}
	if server == 0 {
		t.Error("no replies on the server's lane")
	}

	// BSP with rank 3 three times slower: the other workers wait for it
	// each step, in the servers' hold of their pulls (consistency-wait) or
	// in the stop vote at the step boundary (stop-vote), whichever they
	// reach first.
	r = dml(t, 4, "train", "--data", "synthetic", "--samples", "2000", "--epochs", "1",
		"--sync", "ps", "--consistency", "bsp", "--straggle", "3:3", "--timeline", tl)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	waited := map[int]float64{}
	for _, e := range readTimeline(t, tl) {
		if e.Cat == "wait" && (e.Name == "consistency-wait" || e.Name == "stop-vote") {
			waited[e.Pid] += e.Dur
		}
	}
	// Rank 3 sleeps twice its step time each step (about 0.2 ms or more):
	// over 11 steps the others wait well over a millisecond each.
	for _, w := range []int{1, 2} {
		if waited[w] < 1000 {
			t.Errorf("worker %d waited %.0f µs for the straggler in all (per rank: %v)", w, waited[w], waited)
		}
	}
}

// TestProfileBenchUnderMPI: the benches profile every rank too.
func TestProfileBenchUnderMPI(t *testing.T) {
	dir := t.TempDir()
	r := dml(t, 2, "bench", "allreduce", "-b", "4K", "-e", "16K", "-n", "3", "-w", "1",
		"--profile", "mem", "--profile-dir", dir, "--timeline", filepath.Join(dir, "t.json"))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	checkProfiles(t, dir, "mem", 2)
	pids := map[int]bool{}
	for _, e := range readTimeline(t, filepath.Join(dir, "t.json")) {
		pids[e.Pid] = true
	}
	if !pids[0] || !pids[1] {
		t.Errorf("bench timeline has ranks %v, want 0 and 1", pids)
	}
}

func TestProfileUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--profile", "gpu"}, `--profile "gpu": want cpu, mem, block, mutex or trace`},
		{[]string{"bench", "ps", "--profile", "heap"}, `--profile "heap"`},
		{[]string{"bench", "allreduce", "--timeline", "/nonexistent/t.json"}, "--timeline: folder /nonexistent does not exist"},
		{[]string{"train", "--timeline", "/nonexistent/t.json"}, "--timeline: folder /nonexistent does not exist"},
	} {
		r := dml(t, 0, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d: %s", tc.args, r.code, r.stderr)
		}
	}
}

// TestTimelineOfFailedRun: a run that fails after training started
// writes each rank's own spans to FILE.rank-N.json (no gather: a peer may
// be gone) and no merged FILE.
func TestTimelineOfFailedRun(t *testing.T) {
	tl := filepath.Join(t.TempDir(), "t.json")
	r := dml(t, 0, "train", "--data", "synthetic", "--samples", "500", "--epochs", "1", "--lr", "1e30", "--timeline", tl)
	if r.code == 0 {
		t.Fatalf("a learning rate of 1e30 trained: %s", r.stdout)
	}
	if _, err := os.Stat(tl); err == nil {
		t.Error("a failed run wrote the merged timeline")
	}
	spans := readTimeline(t, tl+".rank-0.json")
	if len(spans) == 0 {
		t.Error("the failed rank's timeline has no spans")
	}
}

// TestSweepProfileAndTimeline: `dml bench sweep --profile cpu --timeline`
// gives every run its own profiles and timeline in runs/ID/.
func TestSweepProfileAndTimeline(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sweep")
	r := dml(t, 0, "bench", "sweep", "--ranks", "2", "--sync", "allreduce-ring", "--model", "softmax", "--batch", "16",
		"--epochs", "1", "--samples", "1000", "--features", "16", "--classes", "4", "--run-timeout", "60s",
		"--launcher", "mpirun --oversubscribe", "--out", out, "--profile", "cpu", "--timeline")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	runs, _ := filepath.Glob(filepath.Join(out, "runs", "*"))
	if len(runs) != 1 {
		t.Fatalf("runs %v, want one", runs)
	}
	checkProfiles(t, runs[0], "cpu", 2)
	pids := map[int]bool{}
	for _, e := range readTimeline(t, filepath.Join(runs[0], "timeline.json")) {
		pids[e.Pid] = true
	}
	if !pids[0] || !pids[1] {
		t.Errorf("the run's timeline has ranks %v, want 0 and 1", pids)
	}
	if r := dml(t, 0, "bench", "sweep", "--profile", "gpu", "--out", out); r.code != 2 || !strings.Contains(r.stderr, `--profile "gpu"`) {
		t.Errorf("--profile gpu: exit %d: %s", r.code, r.stderr)
	}
}
