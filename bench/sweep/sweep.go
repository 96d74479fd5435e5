package sweep

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
)

// Planned is a run with what the checks before the sweep found: Skip is
// why it cannot run at its rank count ("" if it can).
type Planned struct {
	Run
	Skip string
}

// Execute runs the planned runs in order, appends each row to out as soon
// as it is measured (skipped runs too), computes each row's efficiency
// against its baseline (FindBaseline), and returns the rows. A failed run
// is a row; the sweep goes on. Only an error writing the results (or ctx
// ending) stops it.
func Execute(ctx context.Context, plan []Planned, r *Runner, out *Appender) ([]Row, error) {
	families := map[string]string{}
	minRanks := math.MaxInt
	for _, p := range plan {
		families[p.Strategy.Name] = p.Strategy.Family
		minRanks = min(minRanks, p.Ranks)
	}
	var rows []Row
	for i, p := range plan {
		if err := ctx.Err(); err != nil {
			return rows, err
		}
		var row Row
		if p.Skip != "" {
			row = NewRow(p.Run, Skipped)
			row.Reason = p.Skip
		} else {
			progress(r.Progress, "[%d/%d] %s: %d rank(s) …\n", i+1, len(plan), p.ID, p.Ranks)
			row = r.Do(ctx, p.Run)
			switch {
			case row.Status != OK:
			case row.Ranks == minRanks:
				row = Efficiency(row, row) // a baseline: 1 by definition
			default:
				if base, ok := FindBaseline(row, rows, families, minRanks); ok {
					row = Efficiency(row, base)
				}
			}
		}
		progress(r.Progress, "[%d/%d] %s: %s%s\n", i+1, len(plan), p.ID, row.Status, brief(row))
		if row.Status == Failed {
			progress(r.Progress, "  command: %s\n  end of its log:\n%s", row.Command, indent(row.LogTail))
		}
		rows = append(rows, row)
		if out != nil {
			if err := out.Append(row); err != nil {
				return rows, fmt.Errorf("writing results: %w", err)
			}
		}
	}
	return rows, nil
}

func brief(r Row) string {
	switch r.Status {
	case OK:
		return fmt.Sprintf(" %.0f samples/s, %.3f ms/step, final accuracy %.4f", r.SamplesPerSec, r.StepMs, r.FinalAcc)
	default:
		return " (" + r.Reason + ")"
	}
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format, args...)
	}
}
