package engine

import (
	"fmt"
	"math"

	"github.com/dml-project/dml/trainer/model"
)

// How a run ends: the final checkpoint of a stop, --save, the done line.

// FinishRun ends a run: finish (save, summary), then ErrInterrupted when
// Stop ended it early.
func (j *Job) FinishRun(res *Result) (*Result, error) {
	if err := j.finish(res); err != nil {
		return nil, err
	}
	if !j.interrupted {
		return res, nil
	}
	pos := j.stoppedAt
	where := "no checkpoint folder was set"
	if j.lastCheckpoint != "" {
		where = "resume from " + j.lastCheckpoint + " with Checkpointing.ResumeFile"
	}
	return res, fmt.Errorf("stopped after step %d (epoch %d step %d): %s: %w", pos.Steps, pos.Epoch, pos.Step, where, ErrInterrupted)
}

// finish saves the weights (reporting rank) and prints the summary.
func (j *Job) finish(res *Result) error {
	cfg := j.Cfg
	skipped := ""
	switch {
	case j.interrupted && cfg.Save != "" && j.lastCheckpoint != "":
		cfg.Save, skipped = "", ": --save skipped (the state is in the checkpoint)" // not the final weights
	case j.interrupted && cfg.Save != "":
		// No checkpoint holds the state: the weights so far, said to be
		// those of an unfinished run, rather than nothing.
		skipped = fmt.Sprintf(": no checkpoint folder was set, so --save holds the weights after step %d (training did not finish)", res.Steps)
	}
	if j.Reports() && cfg.Save != "" {
		if err := model.SaveNPZModel(cfg.Save, res.Arch, res.Params, res.ModelState, j.labels); err != nil {
			return err
		}
	}
	acc := "not evaluated"
	if !math.IsNaN(res.TestAcc) {
		acc = fmt.Sprintf("%.4f", res.TestAcc)
	}
	j.printf("done: %d steps in %.1fs (%.0f samples/s), test accuracy %s", res.Steps, res.WallSec, res.SamplesPerSec, acc)
	if cfg.Save != "" {
		j.printf(", weights saved to %s", cfg.Save)
	}
	j.printf("\n")
	if j.interrupted {
		j.printf("interrupted after step %d%s\n", res.Steps, skipped)
	}
	if p := res.PS; p != nil {
		saved := ""
		if p.PushBytesUnfiltered > 0 && p.PushBytes < p.PushBytesUnfiltered {
			saved = fmt.Sprintf(" (filters saved %.1f%% of push bytes)", 100*(1-float64(p.PushBytes)/float64(p.PushBytesUnfiltered)))
		}
		j.printf("ps: max staleness %d, mean wait %.2fs per worker, %.0f pushes/s, %.0f pulls/s, %.1f MB sent%s\n",
			p.MaxStaleness, p.WaitSec, p.PushesPerSec, p.PullsPerSec, float64(p.BytesSent)/1e6, saved)
	}
	return nil
}
