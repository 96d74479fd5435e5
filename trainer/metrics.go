package trainer

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"
)

// EpochStats is one epoch's line: what rank 0 prints and --metrics records.
type EpochStats struct {
	Epoch     int      `json:"epoch"`
	Steps     int      `json:"steps"`
	LossScope Scope    `json:"loss_scope"` // what Loss and TrainAcc cover: "global" (every rank's samples, allreduce) or "worker" (the reporting worker's own, ps)
	Loss      float64  `json:"loss"`       // mean training loss over the epoch's samples (in LossScope)
	TrainAcc  float64  `json:"train_acc"`  // accuracy on the epoch's training batches (in LossScope)
	TestAcc   *float64 `json:"test_acc"`   // null when not evaluated this epoch
	// TestLoss is the mean loss over the test set (per token for a text:
	// its perplexity is e^TestLoss), where evaluated.
	TestLoss      *float64 `json:"test_loss,omitempty"`
	SamplesPerSec float64  `json:"samples_per_sec"`
	CommFraction  float64  `json:"comm_fraction"` // share of step time spent in the gradient AllReduce (mean over ranks), or in Pull and Push (ps)
	// CommHidden is the share of the AllReduce time that ran while the
	// backward pass was still running (mean over ranks; allreduce with
	// overlap only, else null): 1 − CommHidden of it was waited for.
	CommHidden *float64 `json:"comm_hidden"`
	WallSec    float64  `json:"wall_sec"`
	// SeqLen is a text's tokens per sample (0: not a text): the line then
	// shows tokens/s, the test loss and perplexity (Loss and TrainAcc are
	// per token).
	SeqLen int `json:"seq_len,omitempty"`
	// TrainSec is the epoch's training time: WallSec without the evaluation.
	TrainSec float64 `json:"train_sec"`
	// LR is the learning rate of each of the epoch's steps (with
	// --lr-schedule, --warmup-epochs or --lr-scale-ranks; omitted when
	// every step has --lr).
	LR []float32 `json:"lr,omitempty"`
	// BytesPerStep is the payload the reporting rank sent per step of the
	// epoch: its AllReduces (allreduce, local SGD's averagings), its
	// pushes and pulls (ps), its models to its neighbours (dpsgd).
	// Omitted where not counted (adpsgd).
	BytesPerStep *float64 `json:"bytes_per_step,omitempty"`
	// LossScale is the loss scale at the epoch's end, and SkippedSteps the
	// steps skipped in it for a gradient that overflowed (with
	// --loss-scale; lossscale.go).
	LossScale    *float64 `json:"loss_scale,omitempty"`
	SkippedSteps int      `json:"skipped_steps,omitempty"`
	// Parameter-server figures of the reporting worker (with --sync ps).
	*PSStats
	// Decentralized training's figures (with --sync dpsgd, adpsgd).
	*GossipStats
}

// String is the epoch's line on the terminal.
func (e EpochStats) String() string {
	test := "     -"
	if e.TestAcc != nil {
		test = fmt.Sprintf("%.4f", *e.TestAcc)
	}
	line := fmt.Sprintf("epoch %3d  loss %.4f  train_acc %.4f  test_acc %s  %9.0f samples/s  comm %4.1f%%  %6.1fs",
		e.Epoch, e.Loss, e.TrainAcc, test, e.SamplesPerSec, 100*e.CommFraction, e.WallSec)
	if e.CommHidden != nil {
		line += fmt.Sprintf("  (%.0f%% of it hidden)", 100**e.CommHidden)
	}
	if e.SeqLen > 0 {
		line += fmt.Sprintf("  %.0f tokens/s", e.SamplesPerSec*float64(e.SeqLen))
		if e.TestLoss != nil {
			line += fmt.Sprintf("  test_loss %.4f  ppl %.2f", *e.TestLoss, math.Exp(*e.TestLoss))
		}
	}
	if e.LossScale != nil {
		line += fmt.Sprintf("  loss scale %g (%d skipped)", *e.LossScale, e.SkippedSteps)
	}
	if e.PSStats != nil {
		line += fmt.Sprintf("  staleness ≤%d  wait %.1fs", e.MaxStaleness, e.WaitSec)
	}
	if g := e.GossipStats; g != nil {
		line += fmt.Sprintf("  consensus %.2e  %.0f avg/s  wait %.1fs", g.Consensus, g.AveragingsPerSec, g.PartnerWaitSec)
	}
	return line
}

// metricsFile writes EpochStats as JSON lines, each with a single write(2)
// straight to the file (no buffer to flush): a kill at any moment leaves
// whole lines only. A write that fails part-way (a full disk) is taken back
// by truncating the file to its last whole line, and ends the file's
// writing: training goes on without it (the metrics are a record of the
// run, not its result), and the caller warns once.
type metricsFile struct {
	f      *os.File
	path   string
	size   int64 // bytes of whole lines written
	lines  int   // whole lines written by this run
	failed bool  // a write failed: no more are tried
}

// openMetricsFile opens the metrics file (a variable for the tests, which
// put a full disk behind it).
var openMetricsFile = os.OpenFile

// openMetrics starts a metrics file at path (""): none), or, with
// resumed, adds to what the interrupted run wrote there.
func openMetrics(path string, resumed bool) (*metricsFile, error) {
	if path == "" {
		return nil, nil
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if resumed {
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	f, err := openMetricsFile(path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("metrics file: %w", err)
	}
	m := &metricsFile{f: f, path: path}
	if resumed {
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("metrics file: %w", err)
		}
		m.size = fi.Size()
	}
	return m, nil
}

// write appends v as a line. Its first failure is returned, saying what
// the file still holds; after it, write does nothing.
func (m *metricsFile) write(v any) error {
	if m == nil || m.failed {
		return nil
	}
	line, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("metrics file %s: %w", m.path, err)
	}
	n, err := m.f.Write(append(line, '\n'))
	if err != nil {
		m.failed = true
		if n > 0 {
			m.f.Truncate(m.size)
			m.f.Seek(m.size, io.SeekStart)
		}
		return fmt.Errorf("metrics file %s: %w (it keeps the %d whole lines written before; no more are written)", m.path, err, m.lines)
	}
	m.size += int64(n)
	m.lines++
	return nil
}

func (m *metricsFile) close() error {
	if m == nil {
		return nil
	}
	if err := m.f.Close(); err != nil {
		return fmt.Errorf("metrics file %s: %w", m.path, err)
	}
	return nil
}

// progress draws a bar on a terminal, at most ten times a second.
type progress struct {
	w     io.Writer
	last  time.Time
	shown bool
}

// IsTerminal reports whether w is a character device (a terminal), where
// a progress bar makes sense; pipes and files get plain lines only.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (p *progress) update(epoch, step, steps int, loss float64) {
	if p == nil || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	const width = 30
	done := width * step / max(1, steps)
	fmt.Fprintf(p.w, "\repoch %3d [%s%s] %3d%%  loss %.4f ", epoch, strings.Repeat("=", done),
		strings.Repeat(" ", width-done), 100*step/max(1, steps), loss)
	p.shown = true
}

func (p *progress) clear() {
	if p == nil || !p.shown {
		return
	}
	fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", 72))
	p.shown = false
}
