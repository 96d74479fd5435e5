package engine

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

// TestMetricsText: a text's epoch records its tokens/s (samples/s × the
// sequence length) and perplexity (e^test loss) as the line shows them;
// other data record neither.
func TestMetricsText(t *testing.T) {
	loss := 1.5
	e := EpochStats{Epoch: 1, SamplesPerSec: 10, SeqLen: 128, TestLoss: &loss}
	b, err := json.Marshal(e.withText())
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(b, &got)
	if got["tokens_per_sec"] != 1280.0 || got["ppl"] != math.Exp(1.5) {
		t.Errorf("text: tokens_per_sec %v, ppl %v; want 1280 and %v", got["tokens_per_sec"], got["ppl"], math.Exp(1.5))
	}
	if line := e.String(); !strings.Contains(line, "1280 tokens/s") || !strings.Contains(line, "ppl 4.48") {
		t.Errorf("the line %q: want its tokens/s and perplexity", line)
	}
	e.SeqLen = 0
	if b, _ := json.Marshal(e.withText()); strings.Contains(string(b), "tokens_per_sec") || strings.Contains(string(b), "ppl") {
		t.Errorf("not a text: %s", b)
	}
}
