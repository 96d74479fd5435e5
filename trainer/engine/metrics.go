package engine

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

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
	if t := e.withText(); t.TokensPerSec != nil {
		line += fmt.Sprintf("  %.0f tokens/s", *t.TokensPerSec)
		if t.Perplexity != nil {
			line += fmt.Sprintf("  test_loss %.4f  ppl %.2f", *e.TestLoss, *t.Perplexity)
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

// OpenMetricsFile opens the metrics file (a variable for the tests, which
// put a full disk behind it).
var OpenMetricsFile = os.OpenFile

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
	f, err := OpenMetricsFile(path, flags, 0o644)
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
