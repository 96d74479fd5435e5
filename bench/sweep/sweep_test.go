package sweep

import (
	"context"
	"encoding/csv"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeDML stands in for `dml train` under a launcher: it writes one epoch
// of metrics and a report per rank (NP from the launcher), or fails when
// --batch is 13.
const fakeDML = `#!/bin/sh
batch=0; metrics=; report=
while [ $# -gt 0 ]; do
  case "$1" in
    --batch) batch=$2; shift;;
    --metrics) metrics=$2; shift;;
    --run-report) report=$2; shift;;
  esac
  shift
done
echo "training with batch $batch"
if [ "$batch" = 99 ]; then sleep 30; fi
if [ "$batch" = 13 ]; then echo "dml: rank 1: training diverged" >&2; exit 1; fi
echo '{"epoch":1,"steps":10,"loss":1,"train_acc":0.5,"test_acc":0.9,"samples_per_sec":1000,"comm_fraction":0.25,"comm_hidden":null,"wall_sec":0.2,"train_sec":0.1}' > "$metrics"
r=0
while [ $r -lt "$NP" ]; do
  echo "{\"rank\":$r,\"size\":$NP,\"cpu_util\":0.5,\"bytes_sent\":100,\"samples\":100}" > "$report.rank-$r.json"
  r=$((r+1))
done
`

func TestExecuteKeepsRowsPastAFailure(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fake-dml")
	if err := os.WriteFile(bin, []byte(fakeDML), 0o755); err != nil {
		t.Fatal(err)
	}
	s := DefaultSpec()
	s.Ranks = []int{1, 2}
	s.Strategies = []string{"allreduce"}
	s.Batches = []int{8, 13, 16}
	runs, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	plan := make([]Planned, len(runs))
	for i, r := range runs {
		plan[i] = Planned{Run: r}
	}
	plan[1].Skip = "cannot run on 2 ranks: a test says so"
	out := filepath.Join(dir, "out")
	os.MkdirAll(out, 0o755)
	app, err := OpenAppender(filepath.Join(out, "results.csv"), filepath.Join(out, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	r := &Runner{Launcher: []string{"env", "NP={np}"}, Binary: bin, Timeout: time.Minute, Target: 0.8, Dir: out, Progress: &log}
	rows, err := Execute(context.Background(), plan, r, app)
	if err != nil {
		t.Fatal(err)
	}
	// The rows are on disk before Close.
	f, err := os.Open(filepath.Join(out, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	app.Close()
	if len(rows) != 6 || len(recs) != 7 {
		t.Fatalf("%d rows, %d CSV records; want 6 and a header", len(rows), len(recs))
	}
	want := []Status{OK, Skipped, Failed, Failed, OK, OK}
	for i, row := range rows {
		if row.Status != want[i] || recs[i+1][5] != string(want[i]) {
			t.Errorf("row %d (%s): %s / CSV %s, want %s (%s)", i, row.ID, row.Status, recs[i+1][5], want[i], row.Reason)
		}
	}
	failed := rows[2]
	if !strings.Contains(failed.Reason, "training diverged") || !strings.Contains(failed.LogTail, "training with batch 13") ||
		!strings.Contains(failed.Command, "--batch 13") {
		t.Errorf("failed row: reason %q, log %q, command %q", failed.Reason, failed.LogTail, failed.Command)
	}
	if !strings.Contains(log.String(), "end of its log") {
		t.Errorf("progress does not show the failed run's log:\n%s", log.String())
	}
	// Measured rows carry their figures; the 2-rank run at batch 16 has its
	// 1-rank baseline.
	if rows[0].WeakEff != 1 || rows[0].Baseline != "allreduce@1" {
		t.Errorf("a 1-rank run is its own baseline: %+v", rows[0])
	}
	ok := rows[5]
	if ok.StepMs != 10 || ok.BytesPerStep != 20 || ok.Baseline != "allreduce@1" || ok.WeakEff != 1 || ok.StrongEff != 0.5 {
		t.Errorf("got %+v", ok)
	}
	// The JSON lines read back.
	jf, _ := os.Open(filepath.Join(out, "results.jsonl"))
	defer jf.Close()
	back, err := ReadRowsJSON(jf)
	if err != nil || len(back) != 6 || back[5].StepMs != 10 || back[1].Status != Skipped {
		t.Errorf("read back %d rows: %v", len(back), err)
	}
}

func TestRunTimeout(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fake-dml")
	if err := os.WriteFile(bin, []byte(fakeDML), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Launcher: []string{"env", "NP={np}"}, Binary: bin, Timeout: 500 * time.Millisecond, Target: 0.8, Dir: dir}
	// Do returns only once the run is killed (a run left alive would hang
	// the test, not pass it): the reason says it was the timeout.
	row := r.Do(context.Background(), Run{ID: "slow", Ranks: 1, Args: []string{"--batch", "99"}})
	if row.Status != Failed || !strings.Contains(row.Reason, "timed out") {
		t.Errorf("got %s (%s)", row.Status, row.Reason)
	}
}

func TestPlotWritesFiles(t *testing.T) {
	dir := t.TempDir()
	var rows []Row
	for i, s := range []string{"allreduce", "ps-bsp", "dpsgd"} {
		for _, n := range []int{1, 2, 4} {
			r := NewRow(Run{ID: s, Model: Model{Name: "mlp"}, Strategy: Strategy{Name: s}, Ranks: n, Batch: 8}, OK)
			if s == "ps-bsp" && n == 1 {
				r.Status = Skipped
			}
			r.SamplesPerSec = float64(1000 * n / (i + 1))
			r.StepMs, r.ComputeMs, r.CommMs, r.WaitMs = 2, 1, 1, 0.5*float64(i)
			r.WeakEff, r.StrongEff = 1/float64(n), 0.9
			r.Accuracy = []AccPoint{{1, 0.5}, {2, 0.7 + 0.01*float64(i)}}
			rows = append(rows, r)
		}
	}
	files, err := Plot(rows, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 5*len(PlotFormats) {
		t.Errorf("%d files: %v", len(files), files)
	}
	for _, p := range files {
		st, err := os.Stat(p)
		if err != nil || st.Size() < 1000 {
			t.Errorf("%s: %v (%d bytes)", p, err, st.Size())
		}
		if strings.HasSuffix(p, ".png") {
			f, _ := os.Open(p)
			img, err := png.Decode(f)
			f.Close()
			if err != nil || img.Bounds().Dx() < 100 {
				t.Errorf("%s: not a PNG: %v", p, err)
			}
		}
		if strings.HasSuffix(p, ".svg") {
			b, _ := os.ReadFile(p)
			if !strings.Contains(string(b), "<svg") || !strings.Contains(string(b), "ps-bsp") && strings.Contains(p, "throughput") {
				t.Errorf("%s: not an SVG with the legend", p)
			}
		}
	}
	// No measured run at all still writes (empty) plots.
	if _, err := Plot(rows[3:4:4][:0], t.TempDir()); err != nil {
		t.Errorf("no rows: %v", err)
	}
}
