package trainer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/model"
)

// runRanks runs fn on n in-process ranks, bounded by a short timeout so a
// rank left waiting fails the test instead of hanging it.
func runRanks(t *testing.T, n int, fn func(c *local.Comm) error) []error {
	t.Helper()
	w := local.NewWorld(n)
	w.SetTimeout(10 * time.Second)
	errs := w.Run(fn)
	// A rank left waiting for one that had failed ends on the world's
	// timeout: its error says so (an event, not an elapsed time).
	for r, err := range errs {
		if errors.Is(err, collectives.ErrTimeout) {
			t.Errorf("rank %d timed out: it waited for a rank that had failed: %v", r, err)
		}
	}
	return errs
}

// TestDataMismatchFoundAtStart: ranks given different data (here, rank 2
// a synthetic set of another seed; on the command line, a different
// --train file, which the configuration hash leaves out) all fail at
// start-up naming rank 2, instead of training on different data or
// timing out (issue 10).
func TestDataMismatchFoundAtStart(t *testing.T) {
	cfg := synthCfg()
	load := func(seed uint64) (*data.Dense, *data.Dense) {
		tr, te, err := cfg.Data.Load(seed)
		if err != nil {
			t.Fatal(err)
		}
		return tr, te
	}
	train, test := load(cfg.Seed)
	train2, _ := load(cfg.Seed + 1)
	errs := runRanks(t, 3, func(c *local.Comm) error {
		tr := train
		if c.Rank() == 2 {
			tr = train2
		}
		_, err := (&Trainer{Comm: c, Backend: cpu.New()}).RunWithData(cfg, tr, test)
		return err
	})
	for r, err := range errs {
		if !errors.Is(err, ErrConfigMismatch) || !strings.Contains(err.Error(), "rank 2 (") || strings.Contains(err.Error(), "rank 1 (") {
			t.Errorf("rank %d: %v; want a data mismatch naming rank 2 only", r, err)
		}
	}
	// The same data everywhere trains.
	errs = runRanks(t, 3, func(c *local.Comm) error {
		_, err := (&Trainer{Comm: c, Backend: cpu.New()}).RunWithData(cfg, train, test)
		return err
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("same data, rank %d: %v", r, err)
		}
	}
}

// TestFingerprint: one changed value, label or shape changes the
// fingerprint; a copy does not.
func TestFingerprint(t *testing.T) {
	cfg := synthCfg()
	train, test, err := cfg.Data.Load(cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	clone := func(d *data.Dense) *data.Dense {
		c := *d
		c.X, c.Y = append([]float32(nil), d.X...), append([]int32(nil), d.Y...)
		return &c
	}
	ref := DenseFingerprint(train, test)
	if got := DenseFingerprint(clone(train), clone(test)); got != ref {
		t.Fatalf("a copy fingerprints %x, the original %x", got, ref)
	}
	for name, edit := range map[string]func(tr, te *data.Dense){
		"one feature":    func(tr, te *data.Dense) { tr.X[len(tr.X)/2] += 1e-6 },
		"last feature":   func(tr, te *data.Dense) { te.X[len(te.X)-1] = -te.X[len(te.X)-1] - 1 },
		"one label":      func(tr, te *data.Dense) { tr.Y[3] = (tr.Y[3] + 1) % int32(tr.Classes) },
		"classes":        func(tr, te *data.Dense) { te.Classes++ },
		"sets swapped":   func(tr, te *data.Dense) { *tr, *te = *te, *tr },
		"reshaped":       func(tr, te *data.Dense) { tr.Cols, tr.Rows = tr.Cols*tr.Rows, 1 },
		"test set empty": func(tr, te *data.Dense) { te.Rows, te.X, te.Y = 0, nil, nil },
	} {
		tr, te := clone(train), clone(test)
		edit(tr, te)
		if DenseFingerprint(tr, te) == ref {
			t.Errorf("%s: same fingerprint", name)
		}
	}
}

// writeLIBSVM writes a small binary LIBSVM file.
func writeLIBSVM(t *testing.T, path string, rows int) {
	t.Helper()
	var b strings.Builder
	for i := range rows {
		fmt.Fprintf(&b, "%d 1:%g 2:%g 4:%g\n", 2*(i%2)-1, float64(i%7)/7, float64(i%3), float64(i%2)+0.5)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRankLocalFailureStopsEveryRank: a training file missing on one rank
// only (paths are per node) ends every rank at start-up: that rank returns
// its own error, the others a *StartError naming it, rank 0 the only one
// of them to print it (issue 10: such a failure was a timeout, and its
// message was never printed).
func TestRankLocalFailureStopsEveryRank(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "train.svm")
	writeLIBSVM(t, good, 60)
	cfg := synthCfg()
	cfg.Model = Logreg
	cfg.Data = DataConfig{Name: "libsvm", Train: good}
	errs := runRanks(t, 3, func(c *local.Comm) error {
		mine := cfg
		if c.Rank() == 1 {
			mine.Data.Train = filepath.Join(dir, "missing.svm")
		}
		_, err := (&Trainer{Comm: c, Backend: cpu.New()}).Run(mine)
		return err
	})
	for r, err := range errs {
		var se *StartError
		if !errors.As(err, &se) || !errors.Is(err, ErrStartFailed) || fmt.Sprint(se.Failed) != "[1]" {
			t.Errorf("rank %d: %v (%T); want a StartError naming rank 1", r, err, err)
			continue
		}
		switch r {
		case 1:
			if se.Err == nil || se.Quiet || !strings.Contains(err.Error(), "missing.svm") {
				t.Errorf("rank 1: %v (quiet %v); want its own error, printed", err, se.Quiet)
			}
		default:
			if se.Err != nil || se.Quiet != (r != 0) || !strings.Contains(err.Error(), "rank 1 could not load its data") {
				t.Errorf("rank %d: %v (quiet %v); want the failed rank named, printed by rank 0 only", r, err, se.Quiet)
			}
		}
	}
}

// TestModelTooBigForMemory: a model that cannot fit in the rank's memory
// is refused before anything is allocated for it, as a usage error naming
// its size, on every rank alike and printed once; the same model trains
// without the limit.
func TestModelTooBigForMemory(t *testing.T) {
	cfg := synthCfg()
	cfg.Hidden = []int{4096, 4096} // 16.8 M parameters: ≥ 400 MB
	train, test, err := cfg.Data.Load(cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		run  func(*Trainer) error
		want string
	}{
		{"loaded data", func(tr *Trainer) error { _, err := tr.RunWithData(cfg, train, test); return err }, "model [12 4096 4096 3] (16846851 parameters"},
		{"synthetic data", func(tr *Trainer) error { _, err := tr.Run(cfg); return err }, "a model of 16846851 parameters"},
	} {
		errs := runRanks(t, 2, func(comm *local.Comm) error {
			return c.run(&Trainer{Comm: comm, Backend: cpu.New(), MemoryLimit: 300 << 20, MemorySource: "test"})
		})
		for r, err := range errs {
			var se *StartError
			if !errors.As(err, &se) || !errors.Is(err, ErrUsage) || se.Quiet != (r != 0) ||
				!strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "are available to it (test") {
				t.Errorf("%s, rank %d: %v; want a usage error naming the model's size, printed by rank 0 only", c.name, r, err)
			}
		}
	}
	// Overflowing sizes: refused as too large, not a panic or an overflow.
	cfg.Hidden = []int{1 << 40, 1 << 40}
	_, err = (&Trainer{Comm: local.NewWorld(1).Comm(0), Backend: cpu.New(), MemoryLimit: 1 << 40}).Run(cfg)
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "more than") {
		t.Errorf("hidden 2^40: %v; want a usage error", err)
	}
	// Synthetic data is sized before it is generated.
	cfg = synthCfg()
	cfg.Data.Samples, cfg.Data.Features = 1<<30, 1<<20
	_, err = (&Trainer{Comm: local.NewWorld(1).Comm(0), Backend: cpu.New(), MemoryLimit: 1 << 30}).Run(cfg)
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "synthetic data of 1073741824 samples × 1048576 features") {
		t.Errorf("huge synthetic data: %v; want a usage error", err)
	}
}

// TestNewArchOverflow: sizes whose product overflows an int are refused.
func TestNewArchOverflow(t *testing.T) {
	for _, sizes := range [][]int{{1 << 40, 1 << 40}, {1 << 62, 1 << 62}, {784, 1 << 40}} {
		_, err := model.NewArch(784, sizes, 10, model.SoftmaxCE)
		if !errors.Is(err, model.ErrTooLarge) {
			t.Errorf("hidden %v: %v; want ErrTooLarge", sizes, err)
		}
	}
	if _, err := model.NewArch(784, []int{1 << 20, 1 << 19}, 10, model.SoftmaxCE); err != nil {
		t.Errorf("a model of 2^39 parameters is representable: %v", err)
	}
}

// BenchmarkDenseFingerprint: the start-up data check over a set of
// Fashion-MNIST's size (70 000 × 784 float32 and the labels, 220 MB).
func BenchmarkDenseFingerprint(b *testing.B) {
	d := &data.Dense{Rows: 70000, Cols: 784, Classes: 10, X: make([]float32, 70000*784), Y: make([]int32, 70000)}
	for i := range d.X {
		d.X[i] = float32(i%255) / 255
	}
	b.SetBytes(int64(4 * (len(d.X) + len(d.Y))))
	for b.Loop() {
		DenseFingerprint(d)
	}
}
