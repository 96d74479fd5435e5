package sweep

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/dml-project/dml/trainer"

	"github.com/dml-project/dml/internal/regfile"
)

// Status says how a run ended.
type Status string

// The statuses of a run.
const (
	OK      Status = "ok"
	Skipped Status = "skipped" // cannot run at this rank count (trainer.Config.ValidateWorld says why)
	Failed  Status = "failed"  // started, and exited non-zero, timed out, or left no metrics
)

// RankReport is what each rank of a `dml train --run-report PREFIX` job
// writes to PREFIX.rank-R.json at its end: its CPU time from the OS
// (getrusage) over its wall time, and what it sent.
type RankReport struct {
	Rank    int     `json:"rank"`
	Size    int     `json:"size"`
	WallSec float64 `json:"wall_sec"` // from just before training (data loading included) to its end
	UserSec float64 `json:"user_sec"`
	SysSec  float64 `json:"sys_sec"`
	// CPUUtil is (user + sys) / wall: 1 is one core busy all the time.
	CPUUtil float64 `json:"cpu_util"`
	// BytesSent counts the payload this rank handed to the transport
	// (point-to-point sends, byte messages; a native MPI AllReduce counts
	// as a ring's 2(n−1)/n of its buffer), start-up checks and evaluation
	// included.
	BytesSent    int64 `json:"bytes_sent"`
	MessagesSent int64 `json:"messages_sent"`
	Steps        int   `json:"steps"`
	// Samples is the whole job's training samples (every worker's), as
	// this rank's trainer.Result has them (0: unknown, a failed run).
	Samples float64 `json:"samples"`
	Error   string  `json:"error,omitempty"`
}

// Row is one run's line in the results: what it is, how it ended, and
// what it measured. Times are per step of the reporting rank (rank 0, or
// the first worker under a parameter server).
type Row struct {
	ID       string `json:"id"`
	Model    string `json:"model"`
	Strategy string `json:"strategy"`
	Ranks    int    `json:"ranks"`
	Batch    int    `json:"batch"`
	Status   Status `json:"status"`
	Reason   string `json:"reason,omitempty"` // why skipped or failed
	Command  string `json:"command,omitempty"`
	LogTail  string `json:"log_tail,omitempty"` // the end of a failed run's output

	Epochs int `json:"epochs"`
	Steps  int `json:"steps"`
	// SamplesPerSec is the job's training throughput: every rank's (every
	// worker's) samples over the reporting rank's training time,
	// evaluation excluded.
	SamplesPerSec float64 `json:"samples_per_sec"`
	// StepMs = ComputeMs + CommMs: the training time over the steps.
	StepMs float64 `json:"step_ms"`
	// ComputeMs is the step time outside communication (forward, backward,
	// the update, batch loading).
	ComputeMs float64 `json:"compute_ms"`
	// CommMs is the step time in communication calls as the trainer
	// measures it (comm_fraction): the AllReduce, the parameter server's
	// Pull and Push, the model exchange with neighbours; waiting for
	// slower peers inside those calls included.
	CommMs float64 `json:"comm_ms"`
	// WaitMs is the part of CommMs the strategy reports as blocked on
	// peers: a ps worker's wait_sec, a dpsgd/adpsgd rank's partner wait.
	// NaN (empty) for allreduce, whose calls do not separate it.
	WaitMs float64 `json:"wait_ms"`
	// BytesPerStep is every rank's bytes sent over the reporting rank's
	// steps.
	BytesPerStep float64   `json:"bytes_per_step"`
	CPUUtil      []float64 `json:"cpu_util"` // per rank, (user+sys)/wall from getrusage
	CPUUtilMean  float64   `json:"cpu_util_mean"`
	// TimeToTargetSec is the wall time from the start of training to the
	// end of the first epoch whose test accuracy reached the target (NaN:
	// never; the resolution is one epoch).
	TimeToTargetSec float64 `json:"time_to_target_sec"`
	FinalAcc        float64 `json:"final_acc"`
	TrainSec        float64 `json:"train_sec"` // training time, evaluation excluded
	WallSec         float64 `json:"wall_sec"`  // training and evaluation, all epochs
	// Accuracy is the test accuracy after each epoch against WallSec so far.
	Accuracy []AccPoint `json:"accuracy"`
	// WeakEff = StepMs(base)/StepMs: the per-rank batch is fixed, so ideal
	// weak scaling keeps the step time. StrongEff = TrainSec(base)·b /
	// (TrainSec·n): the same data set and epochs over n ranks, ideally n
	// times faster. Base is the Baseline run (b ranks). NaN: no baseline.
	WeakEff   float64 `json:"weak_eff"`
	StrongEff float64 `json:"strong_eff"`
	Baseline  string  `json:"baseline,omitempty"`
}

// AccPoint is one epoch's test accuracy and the wall time it was reached.
type AccPoint struct {
	WallSec  float64 `json:"wall_sec"`
	Accuracy float64 `json:"accuracy"`
}

// MarshalJSON writes NaN and ±Inf, which JSON cannot hold, as null.
func (r Row) MarshalJSON() ([]byte, error) {
	type plain Row
	b, err := json.Marshal(struct {
		plain
		WaitMs          *float64 `json:"wait_ms"`
		TimeToTargetSec *float64 `json:"time_to_target_sec"`
		WeakEff         *float64 `json:"weak_eff"`
		StrongEff       *float64 `json:"strong_eff"`
		SamplesPerSec   *float64 `json:"samples_per_sec"`
		StepMs          *float64 `json:"step_ms"`
		ComputeMs       *float64 `json:"compute_ms"`
		CommMs          *float64 `json:"comm_ms"`
		BytesPerStep    *float64 `json:"bytes_per_step"`
		CPUUtilMean     *float64 `json:"cpu_util_mean"`
		FinalAcc        *float64 `json:"final_acc"`
		TrainSec        *float64 `json:"train_sec"`
		WallSec         *float64 `json:"wall_sec"`
	}{plain(r), finite(r.WaitMs), finite(r.TimeToTargetSec), finite(r.WeakEff), finite(r.StrongEff),
		finite(r.SamplesPerSec), finite(r.StepMs), finite(r.ComputeMs), finite(r.CommMs), finite(r.BytesPerStep),
		finite(r.CPUUtilMean), finite(r.FinalAcc), finite(r.TrainSec), finite(r.WallSec)})
	return b, err
}

func finite(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// NewRow is a run's row before it is measured: every figure unknown.
func NewRow(run Run, status Status) Row {
	nan := math.NaN()
	return Row{ID: run.ID, Model: run.Model.Name, Strategy: run.Strategy.Name, Ranks: run.Ranks, Batch: run.Batch, Status: status,
		SamplesPerSec: nan, StepMs: nan, ComputeMs: nan, CommMs: nan, WaitMs: nan, BytesPerStep: nan, CPUUtilMean: nan,
		TimeToTargetSec: nan, FinalAcc: nan, TrainSec: nan, WallSec: nan, WeakEff: nan, StrongEff: nan}
}

// ReadMetrics reads a --metrics file (one trainer.EpochStats per line).
func ReadMetrics(path string) ([]trainer.EpochStats, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []trainer.EpochStats
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e trainer.EpochStats
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return out, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// ReadReports reads the PREFIX.rank-*.json files, ordered by rank.
func ReadReports(prefix string) ([]RankReport, error) {
	paths, err := filepath.Glob(prefix + ".rank-*.json")
	if err != nil {
		return nil, err
	}
	var out []RankReport
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return out, err
		}
		var r RankReport
		if err := json.Unmarshal(b, &r); err != nil {
			return out, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rank < out[j].Rank })
	return out, nil
}

// Aggregate fills row's figures from the reporting rank's epochs and every
// rank's report; target is the accuracy for TimeToTargetSec.
func Aggregate(row Row, epochs []trainer.EpochStats, reports []RankReport, target float64) Row {
	var train, wall, samples, comm, wait float64
	waitKnown := false
	steps := 0
	row.Accuracy = nil
	for _, e := range epochs {
		t := e.TrainSec
		if t <= 0 { // metrics written before train_sec existed
			t = e.WallSec
		}
		train += t
		wall += e.WallSec
		samples += e.SamplesPerSec * t
		comm += e.CommFraction * t
		steps += e.Steps
		switch {
		case e.PSStats != nil:
			wait += e.PSStats.WaitSec
			waitKnown = true
		case e.GossipStats != nil:
			wait += e.GossipStats.PartnerWaitSec
			waitKnown = true
		}
		if e.TestAcc != nil {
			row.Accuracy = append(row.Accuracy, AccPoint{WallSec: wall, Accuracy: *e.TestAcc})
			row.FinalAcc = *e.TestAcc
			if *e.TestAcc >= target && math.IsNaN(row.TimeToTargetSec) {
				row.TimeToTargetSec = wall
			}
		}
	}
	row.Epochs, row.Steps, row.TrainSec, row.WallSec = len(epochs), steps, train, wall
	if train > 0 {
		row.SamplesPerSec = samples / train
	}
	if steps > 0 {
		row.StepMs = 1000 * train / float64(steps)
		row.CommMs = 1000 * comm / float64(steps)
		row.ComputeMs = row.StepMs - row.CommMs
		if waitKnown {
			row.WaitMs = min(1000*wait/float64(steps), row.CommMs)
		}
	}
	var bytes int64
	row.CPUUtil = nil
	sum, jobSamples := 0.0, 0.0
	for _, r := range reports {
		jobSamples = max(jobSamples, r.Samples)
		bytes += r.BytesSent
		row.CPUUtil = append(row.CPUUtil, r.CPUUtil)
		sum += r.CPUUtil
	}
	if jobSamples > 0 && train > 0 {
		// A parameter-server worker's epochs count its own samples only.
		row.SamplesPerSec = jobSamples / train
	}
	if len(reports) > 0 {
		row.CPUUtilMean = sum / float64(len(reports))
		if steps > 0 {
			row.BytesPerStep = float64(bytes) / float64(steps)
		}
	}
	return row
}

// Efficiency sets row's weak and strong scaling efficiency against base
// (a measured run with fewer or as many ranks): see Row.
func Efficiency(row, base Row) Row {
	row.Baseline = fmt.Sprintf("%s@%d", base.Strategy, base.Ranks)
	if row.StepMs > 0 && base.StepMs > 0 {
		row.WeakEff = base.StepMs / row.StepMs
	}
	if row.TrainSec > 0 && base.TrainSec > 0 && row.Ranks > 0 {
		row.StrongEff = base.TrainSec * float64(base.Ranks) / (row.TrainSec * float64(row.Ranks))
	}
	return row
}

// FindBaseline returns the run row's efficiency is measured against among
// done (the rows measured so far): the same strategy, model and batch at
// the smallest rank count that ran; if that strategy has no run at the
// sweep's smallest rank count (a parameter server or adpsgd cannot run on
// one rank), the allreduce family's run there (plain allreduce first).
func FindBaseline(row Row, done []Row, families map[string]string, minRanks int) (Row, bool) {
	if row.Ranks <= minRanks {
		return Row{}, false // it is a baseline
	}
	var best *Row
	for i := range done {
		d := &done[i]
		if d.Status != OK || d.Model != row.Model || d.Batch != row.Batch || d.Strategy != row.Strategy || d.Ranks > row.Ranks {
			continue
		}
		if best == nil || d.Ranks < best.Ranks {
			best = d
		}
	}
	if best != nil && best.Ranks == minRanks {
		return *best, true
	}
	for i := range done {
		d := &done[i]
		if d.Status != OK || d.Model != row.Model || d.Batch != row.Batch || d.Ranks != minRanks || families[d.Strategy] != "allreduce" {
			continue
		}
		if best == nil || best.Ranks != minRanks || (d.Strategy == "allreduce" && best.Strategy != "allreduce") {
			best = d
		}
	}
	if best == nil {
		return Row{}, false
	}
	return *best, true
}
