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

// jsonArray writes values as the elements of one JSON array, each as it
// comes (a run cut short still leaves every finished row on the output);
// close writes the closing bracket, or [] when there were none.
type jsonArray struct {
	w io.Writer
	n int
}

func (a *jsonArray) add(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	sep := ",\n  "
	if a.n == 0 {
		sep = "[\n  "
	}
	a.n++
	_, err = fmt.Fprintf(a.w, "%s%s", sep, b)
	return err
}

func (a *jsonArray) close() error {
	end := "\n]\n"
	if a.n == 0 {
		end = "[]\n"
	}
	_, err := io.WriteString(a.w, end)
	return err
}

// RowWriter writes rows as they come in one of Formats; Close ends the
// output (the JSON array's closing bracket).
type RowWriter struct {
	w      io.Writer
	format string
	algo   string
	csv    *csv.Writer
	json   jsonArray
}

// NewRowWriter returns a writer for format (see Formats).
func NewRowWriter(w io.Writer, format string) (*RowWriter, error) {
	if err := CheckFormat(format); err != nil {
		return nil, err
	}
	rw := &RowWriter{w: w, format: format, json: jsonArray{w: w}}
	if format == "csv" {
		rw.csv = csv.NewWriter(w)
		rw.csv.Write([]string{"algo", "size", "count", "time_us", "algbw", "busbw", "wrong"})
	}
	return rw, nil
}

// Write writes one row.
func (rw *RowWriter) Write(r Row) error {
	switch rw.format {
	case "csv":
		rw.csv.Write([]string{r.Algo, strconv.FormatInt(r.Size, 10), strconv.Itoa(r.Count),
			strconv.FormatFloat(r.TimeUS, 'f', 2, 64), strconv.FormatFloat(r.AlgBW, 'f', 3, 64),
			strconv.FormatFloat(r.BusBW, 'f', 3, 64), strconv.Itoa(r.Wrong)})
		rw.csv.Flush()
		return rw.csv.Error()
	case "json":
		return rw.json.add(r)
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
		return rw.json.close()
	}
	return nil
}
