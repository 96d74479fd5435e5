package sweep

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/dml-project/dml/internal/regfile"
)

// CSVColumns are the columns of results.csv, in order (Row's JSON names).
var CSVColumns = []string{"id", "model", "strategy", "ranks", "batch", "status", "samples_per_sec", "step_ms",
	"compute_ms", "comm_ms", "wait_ms", "bytes_per_step", "cpu_util_mean", "cpu_util", "time_to_target_sec",
	"final_acc", "train_sec", "wall_sec", "weak_eff", "strong_eff", "baseline", "epochs", "steps", "reason", "command"}

func num(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return ""
	}
	return strconv.FormatFloat(x, 'g', 6, 64)
}

func (r Row) csvRecord() []string {
	utils := make([]string, len(r.CPUUtil))
	for i, u := range r.CPUUtil {
		utils[i] = strconv.FormatFloat(u, 'f', 3, 64)
	}
	return []string{r.ID, r.Model, r.Strategy, strconv.Itoa(r.Ranks), strconv.Itoa(r.Batch), string(r.Status),
		num(r.SamplesPerSec), num(r.StepMs), num(r.ComputeMs), num(r.CommMs), num(r.WaitMs), num(r.BytesPerStep),
		num(r.CPUUtilMean), strings.Join(utils, ";"), num(r.TimeToTargetSec), num(r.FinalAcc), num(r.TrainSec),
		num(r.WallSec), num(r.WeakEff), num(r.StrongEff), r.Baseline, strconv.Itoa(r.Epochs), strconv.Itoa(r.Steps),
		r.Reason, r.Command}
}

// Appender appends each row, as it is measured, to results.csv and
// results.jsonl, and syncs both: a sweep that dies later keeps every row
// written before.
type Appender struct {
	csvF, jsonF *os.File
	csv         *csv.Writer
}

// OpenAppender creates (truncating) csvPath and jsonPath and writes the
// CSV header.
func OpenAppender(csvPath, jsonPath string) (*Appender, error) {
	cf, err := regfile.Create(csvPath)
	if err != nil {
		return nil, err
	}
	jf, err := regfile.Create(jsonPath)
	if err != nil {
		cf.Close()
		return nil, err
	}
	a := &Appender{csvF: cf, jsonF: jf, csv: csv.NewWriter(cf)}
	if err := a.csv.Write(CSVColumns); err != nil {
		a.Close()
		return nil, err
	}
	a.csv.Flush()
	return a, a.csv.Error()
}

// Append writes one row to both files and syncs them.
func (a *Appender) Append(r Row) error {
	if err := a.csv.Write(r.csvRecord()); err != nil {
		return err
	}
	a.csv.Flush()
	if err := a.csv.Error(); err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := a.jsonF.Write(append(b, '\n')); err != nil {
		return err
	}
	if err := a.csvF.Sync(); err != nil {
		return err
	}
	return a.jsonF.Sync()
}

// Close closes both files.
func (a *Appender) Close() error {
	a.csv.Flush()
	err := a.csv.Error()
	if e := a.csvF.Close(); err == nil {
		err = e
	}
	if e := a.jsonF.Close(); err == nil {
		err = e
	}
	return err
}

// ReadRowsJSON reads results.jsonl back; a null figure stays NaN.
func ReadRowsJSON(r io.Reader) ([]Row, error) {
	dec := json.NewDecoder(r)
	var out []Row
	for dec.More() {
		row := NewRow(Run{}, "")
		if err := dec.Decode(&row); err != nil {
			return out, err
		}
		out = append(out, row)
	}
	return out, nil
}

// WriteTable prints the summary: one line per run.
func WriteTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tranks\tstatus\tsamples/s\tstep ms\tcompute\tcomm\twait\tKB/step\tCPU/rank\tto target s\tfinal acc\tweak eff\tstrong eff\tbaseline\t")
	f := func(x float64, prec int) string {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "-"
		}
		return strconv.FormatFloat(x, 'f', prec, 64)
	}
	for _, r := range rows {
		name := r.Strategy
		if r.Model != "" {
			name = fmt.Sprintf("%s %s b%d", r.Model, r.Strategy, r.Batch)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, r.Ranks, r.Status,
			f(r.SamplesPerSec, 0), f(r.StepMs, 3), f(r.ComputeMs, 3), f(r.CommMs, 3), f(r.WaitMs, 3), f(r.BytesPerStep/1024, 1),
			f(r.CPUUtilMean, 2), f(r.TimeToTargetSec, 2), f(r.FinalAcc, 4), f(r.WeakEff, 2), f(r.StrongEff, 2), orDash(r.Baseline))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Status != OK && r.Reason != "" {
			fmt.Fprintf(w, "%s %s: %s\n", r.ID, r.Status, r.Reason)
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
