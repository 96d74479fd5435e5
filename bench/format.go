package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// Formats lists the output formats of the bench commands.
var Formats = []string{"table", "csv", "json"}

// CheckFormat reports an unknown format name.
func CheckFormat(f string) error {
	for _, ok := range Formats {
		if f == ok {
			return nil
		}
	}
	return fmt.Errorf("unknown format %q (want table, csv or json)", f)
}

// RowWriter writes rows as they come in one of Formats; Close ends the
// output (the JSON array's closing bracket).
type RowWriter struct {
	w      io.Writer
	format string
	algo   string
	csv    *csv.Writer
	n      int
}

// NewRowWriter returns a writer for format (see Formats).
func NewRowWriter(w io.Writer, format string) (*RowWriter, error) {
	if err := CheckFormat(format); err != nil {
		return nil, err
	}
	rw := &RowWriter{w: w, format: format}
	if format == "csv" {
		rw.csv = csv.NewWriter(w)
		rw.csv.Write([]string{"algo", "size", "count", "time_us", "algbw", "busbw", "wrong"})
	}
	return rw, nil
}

// Write writes one row.
func (rw *RowWriter) Write(r Row) error {
	defer func() { rw.n++ }()
	switch rw.format {
	case "csv":
		rw.csv.Write([]string{r.Algo, strconv.FormatInt(r.Size, 10), strconv.Itoa(r.Count),
			strconv.FormatFloat(r.TimeUS, 'f', 2, 64), strconv.FormatFloat(r.AlgBW, 'f', 3, 64),
			strconv.FormatFloat(r.BusBW, 'f', 3, 64), strconv.Itoa(r.Wrong)})
		rw.csv.Flush()
		return rw.csv.Error()
	case "json":
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		sep := ",\n  "
		if rw.n == 0 {
			sep = "[\n  "
		}
		_, err = fmt.Fprintf(rw.w, "%s%s", sep, b)
		return err
	}
	if r.Algo != rw.algo {
		rw.algo = r.Algo
		fmt.Fprintf(rw.w, "#\n# algo %s, %d ranks, float32 sum, time = median over %d iterations of the slowest rank\n", r.Algo, r.Ranks, r.Samples)
		fmt.Fprintf(rw.w, "#%12s %12s %10s %9s %9s %8s\n", "size(B)", "count", "time(us)", "algbw", "busbw", "#wrong")
		fmt.Fprintf(rw.w, "#%12s %12s %10s %9s %9s %8s\n", "", "(elems)", "", "(GB/s)", "(GB/s)", "")
	}
	_, err := fmt.Fprintf(rw.w, " %12d %12d %10.1f %9.2f %9.2f %8d\n", r.Size, r.Count, r.TimeUS, r.AlgBW, r.BusBW, r.Wrong)
	return err
}

// Close finishes the output.
func (rw *RowWriter) Close() error {
	if rw.format == "json" {
		if rw.n == 0 {
			_, err := io.WriteString(rw.w, "[]\n")
			return err
		}
		_, err := io.WriteString(rw.w, "\n]\n")
		return err
	}
	return nil
}
