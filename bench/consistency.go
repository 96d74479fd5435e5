package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer"
	"github.com/dml-project/dml/trainer/trace"
)

// ConsistencyConfig is one `dml bench consistency` sweep: the same training
// job under each strategy (a parameter server's consistency model, …),
// without and with a straggler.
type ConsistencyConfig struct {
	Base       trainer.Config   // the job; each strategy sets its own Sync
	Strategies []Strategy       // e.g. ParseStrategy("ssp")
	Straggle   trainer.Straggle // the slowed rank; Rank < 0: no straggler runs
	Target     float64          // test accuracy whose first epoch counts as time-to-target
	Tracer     trace.Tracer     // receives every run's spans (nil: none)
	// MemoryLimit and MemorySource go to every run's Trainer: data and
	// models that would not fit are refused before they are allocated.
	MemoryLimit  int64
	MemorySource string
}

// Strategy is one way of training the job that the consistency bench
// compares: a variant of the strategy registry (trainer.Variants). Name is
// its row label, Apply sets the job's Sync and what goes with it (e.g.
// PS.Consistency), Servers says its first ranks do not train.
type Strategy = trainer.Variant

// Strategies lists the names ParseStrategy knows, in the bench's default
// order: the parameter server's consistency models, then the other
// strategies, each in registry order.
var Strategies = func() []string {
	var servers, others []string
	for _, v := range trainer.Variants() {
		if v.Servers {
			servers = append(servers, v.Name)
		} else {
			others = append(others, v.Name)
		}
	}
	return append(servers, others...)
}()

// ParseStrategy returns the strategy a `--consistency` name stands for: a
// parameter-server consistency model (bsp, ssp, asp, dssp), or another
// --sync: allreduce, dpsgd, adpsgd (on the job's --topology). The names
// come from the strategy registry (trainer.ParseVariant): a new strategy
// is known here without a change.
func ParseStrategy(name string) (Strategy, error) { return trainer.ParseVariant(name) }

// ConsistencyRow is one run of the sweep.
type ConsistencyRow struct {
	Consistency  string   `json:"consistency"`
	Straggler    string   `json:"straggler"`          // "none" or "RANK:FACTOR"
	TimeToTarget *float64 `json:"time_to_target_sec"` // nil: never reached
	EpochsToHit  int      `json:"epochs_to_target"`
	FinalAcc     float64  `json:"final_acc"`
	WallSec      float64  `json:"wall_sec"`
	MaxStaleness int      `json:"max_staleness"`
	WaitSec      float64  `json:"wait_sec"` // mean per worker
}

// RunConsistency runs the sweep on every rank and calls emit on the
// reporting rank (the first worker) after each run. Time to target is the
// wall time, counted from the start of training, of the first epoch whose
// test accuracy reaches Target (nil if none does).
// newBackend opens a backend for each run (closed after it).
func RunConsistency(c collectives.Comm, newBackend func() (kernels.Backend, error), cfg ConsistencyConfig, emit func(ConsistencyRow)) ([]ConsistencyRow, error) {
	if !(cfg.Target > 0 && cfg.Target <= 1) {
		return nil, fmt.Errorf("target accuracy %v must be in (0, 1]", cfg.Target)
	}
	straggles := []trainer.Straggle{{Rank: -1, Factor: 1}}
	if cfg.Straggle.Rank >= 0 {
		lo := 0
		for _, m := range cfg.Strategies {
			if m.Servers {
				lo = cfg.Base.PS.Servers
			}
		}
		if cfg.Straggle.Rank < lo || cfg.Straggle.Rank >= c.Size() {
			return nil, fmt.Errorf("straggler rank %d is not a worker (workers are ranks %d..%d)", cfg.Straggle.Rank, lo, c.Size()-1)
		}
		straggles = append(straggles, cfg.Straggle)
	}
	var rows []ConsistencyRow
	for _, st := range straggles {
		for _, m := range cfg.Strategies {
			job := cfg.Base
			m.Apply(&job)
			job.Straggle, job.EvalEvery = st, 1
			straggler, label := "none", "no straggler" // the row's, the error's
			if st.Rank >= 0 {
				straggler, label = fmt.Sprintf("%d:%g", st.Rank, st.Factor), fmt.Sprintf("straggler rank %d ×%g", st.Rank, st.Factor)
			}
			// Each run writes its own --save and --metrics files.
			tag := m.Name + "-" + strings.Replace(straggler, ":", "x", 1)
			job.Save, job.Metrics = perRun(job.Save, tag), perRun(job.Metrics, tag)
			be, err := newBackend()
			if err != nil {
				return rows, err
			}
			res, err := (&trainer.Trainer{Comm: c, Backend: be, Tracer: cfg.Tracer, MemoryLimit: cfg.MemoryLimit, MemorySource: cfg.MemorySource}).Run(job)
			if cerr := be.Close(); err == nil && cerr != nil {
				err = cerr
			}
			if err != nil {
				return rows, fmt.Errorf("%s, %s: %w", m.Name, label, err)
			}
			row := ConsistencyRow{Consistency: m.Name, Straggler: straggler, FinalAcc: res.TestAcc, WallSec: res.WallSec}
			if res.PS != nil {
				row.MaxStaleness, row.WaitSec = res.PS.MaxStaleness, res.PS.WaitSec
			}
			elapsed := 0.0
			for _, e := range res.Epochs {
				if g := e.GossipStats; g != nil {
					row.WaitSec += g.PartnerWaitSec // the reporting rank's
				}
			}
			for _, e := range res.Epochs {
				elapsed += e.WallSec
				if e.TestAcc != nil && *e.TestAcc >= cfg.Target {
					row.TimeToTarget, row.EpochsToHit = &elapsed, e.Epoch
					break
				}
			}
			rows = append(rows, row)
			if c.Rank() == cfg.Base.PS.Servers && emit != nil {
				emit(row)
			}
		}
	}
	return rows, nil
}

// WriteConsistency writes rows as a table, CSV or JSON.
func WriteConsistency(w io.Writer, format string, target float64, rows []ConsistencyRow) error {
	switch format {
	case "json":
		b, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "csv":
		fmt.Fprintln(w, "consistency,straggler,time_to_target_sec,epochs_to_target,final_acc,wall_sec,max_staleness,wait_sec")
		for _, r := range rows {
			fmt.Fprintf(w, "%s,%s,%s,%d,%.4f,%.2f,%d,%.2f\n", r.Consistency, r.Straggler, fmtSec(r.TimeToTarget, ""), r.EpochsToHit,
				r.FinalAcc, r.WallSec, r.MaxStaleness, r.WaitSec)
		}
		return nil
	}
	fmt.Fprintf(w, "# strategies: time to %.3f test accuracy, and final accuracy\n", target)
	fmt.Fprintf(w, "#%11s %10s %14s %7s %9s %8s %10s %9s\n", "consistency", "straggler", "to_target(s)", "epochs", "final_acc", "wall(s)", "staleness", "wait(s)")
	for _, r := range rows {
		fmt.Fprintf(w, " %11s %10s %14s %7d %9.4f %8.2f %10d %9.2f\n", r.Consistency, r.Straggler, fmtSec(r.TimeToTarget, "not reached"),
			r.EpochsToHit, r.FinalAcc, r.WallSec, r.MaxStaleness, r.WaitSec)
	}
	return nil
}

func fmtSec(s *float64, none string) string {
	if s == nil {
		return none
	}
	return fmt.Sprintf("%.2f", *s)
}

// perRun is path with tag before its extension ("w.npz" → "w.bsp-none.npz",
// "w.ssp-3x4.npz" with rank 3 slowed 4×),
// or "" for "".
func perRun(path, tag string) string {
	if path == "" {
		return ""
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "." + tag + ext
}
