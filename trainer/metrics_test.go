package trainer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/internal/syncbuf"
	"github.com/dml-project/dml/kernels/cpu"
)

// TestMetricsWholeLines: every line is in the file, whole, as soon as
// write returns (so a kill leaves no half line), before close.
func TestMetricsWholeLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	m, err := openMetrics(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	acc := 0.5
	for epoch := 1; epoch <= 3; epoch++ {
		if err := m.write(EpochStats{Epoch: epoch, Loss: 1 / float64(epoch), TestAcc: &acc}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path) // another handle, the writer still open
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitAfter(string(b), "\n")
		if len(lines) != epoch+1 || lines[epoch] != "" {
			t.Fatalf("after epoch %d the file holds %q", epoch, b)
		}
		var got EpochStats
		if err := json.Unmarshal([]byte(lines[epoch-1]), &got); err != nil || got.Epoch != epoch {
			t.Fatalf("line %d %q: %v", epoch, lines[epoch-1], err)
		}
	}
}

// TestMetricsWriteError: a failing write (here /dev/full) is an error
// naming the file, once: later writes are not tried.
func TestMetricsWriteError(t *testing.T) {
	m, err := openMetrics("/dev/full", false)
	if err != nil {
		t.Skipf("cannot open /dev/full: %v", err)
	}
	defer m.close()
	if err := m.write(EpochStats{Epoch: 1}); err == nil || !strings.Contains(err.Error(), "metrics file /dev/full") ||
		!strings.Contains(err.Error(), "no space left") || strings.Contains(err.Error(), "--metrics") {
		t.Errorf("write to a full device: %v", err)
	}
	if err := m.write(EpochStats{Epoch: 2}); err != nil {
		t.Errorf("second write after a failure: %v, want none tried", err)
	}
}

// TestMetricsFullDiskTrainingGoesOn: a metrics file whose disk fills up
// does not end training (it aborted it, saying "--metrics: --metrics:
// …"): the run warns once, finishes every epoch and still saves its
// weights, under allreduce and adpsgd (which writes metrics on its own).
func TestMetricsFullDiskTrainingGoesOn(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	full.Close()
	defer func(f func(string, int, os.FileMode) (*os.File, error)) { openMetricsFile = f }(openMetricsFile)
	openMetricsFile = func(string, int, os.FileMode) (*os.File, error) { return os.OpenFile("/dev/full", os.O_WRONLY, 0) }
	for _, sync := range []Sync{SyncAllreduce, SyncADPSGD} {
		t.Run(sync.String(), func(t *testing.T) {
			cfg := synthCfg()
			cfg.Epochs, cfg.Sync = 3, sync
			cfg.Metrics = filepath.Join(t.TempDir(), "m.jsonl")
			cfg.Save = filepath.Join(t.TempDir(), "w.npz")
			var warn syncbuf.Buffer
			errs := local.NewWorld(2).Run(func(c *local.Comm) error {
				tr := &Trainer{Comm: c, Backend: cpu.New(), Warnings: &warn}
				res, err := tr.Run(cfg)
				if err == nil && len(res.Epochs) != cfg.Epochs {
					err = fmt.Errorf("%d epochs trained, want %d", len(res.Epochs), cfg.Epochs)
				}
				return err
			})
			noErrs(t, errs)
			if n := strings.Count(warn.String(), "\n"); n != 1 || !strings.Contains(warn.String(), "warning: metrics file") ||
				!strings.Contains(warn.String(), "training goes on") {
				t.Errorf("warnings %q: want one line saying the metrics file failed and training goes on", warn.String())
			}
			if _, err := os.Stat(cfg.Save); err != nil {
				t.Errorf("weights not saved: %v", err)
			}
		})
	}
}

// TestMetricsAppendOnResume: a resumed run adds its lines after the
// interrupted run's; a fresh run starts the file again.
func TestMetricsAppendOnResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	for i, resumed := range []bool{false, true, true, false} {
		m, err := openMetrics(path, resumed)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.write(EpochStats{Epoch: i + 1}); err != nil {
			t.Fatal(err)
		}
		m.close()
		b, _ := os.ReadFile(path)
		want := []int{1, 2, 3, 1}[i]
		if n := strings.Count(string(b), "\n"); n != want {
			t.Fatalf("after run %d (resumed %v): %d lines, want %d:\n%s", i, resumed, n, want, b)
		}
	}
}
