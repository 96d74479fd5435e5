package trainer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/internal/syncbuf"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/trainer/engine"
)

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
	defer func(f func(string, int, os.FileMode) (*os.File, error)) { engine.OpenMetricsFile = f }(engine.OpenMetricsFile)
	engine.OpenMetricsFile = func(string, int, os.FileMode) (*os.File, error) { return os.OpenFile("/dev/full", os.O_WRONLY, 0) }
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
