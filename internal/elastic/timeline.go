package elastic

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dml-project/dml/internal/regfile"
	"github.com/dml-project/dml/trainer/trace"
)

// attemptTimeline is attempt k's --timeline: FILE.attempt-K.json (a
// failed attempt's ranks write FILE.attempt-K.json.rank-N.json).
func attemptTimeline(file string, k int) string { return fmt.Sprintf("%s.attempt-%d.json", file, k) }

// attemptFiles lists the files an earlier launch with this --timeline
// left: FILE.attempt-K.json and FILE.attempt-K.json.rank-N.json, matched
// by name exactly — never through a glob of the user's text, whose [ ] *
// ? would name other files (issue 29).
func attemptFiles(file string) []string {
	var out []string
	for _, f := range numbered(file, ".attempt-", ".json") {
		out = append(out, f)
		out = append(out, numbered(f, ".rank-", ".json")...)
	}
	return out
}

// numbered lists the files of file's folder named file's base name, then
// infix, a decimal number, then suffix, as paths beside file.
func numbered(file, infix, suffix string) []string {
	dir, base := filepath.Split(file)
	ents, err := os.ReadDir(filepath.Clean(dir + "."))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), base+infix)
		if !ok {
			continue
		}
		num, ok := strings.CutSuffix(rest, suffix)
		if ok && num != "" && strings.Trim(num, "0123456789") == "" {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// concatTimelines writes file, the job's timeline across its attempts
// (trace.ConcatAttempts): each attempt's merged timeline or, for one that
// failed, its ranks' own. An attempt that left none is left out.
func concatTimelines(file string, attempts int) error {
	var traces []trace.AttemptTrace
	for k := range attempts {
		name := attemptTimeline(file, k)
		files := []string{name}
		if _, err := os.Stat(name); err != nil {
			files = numbered(name, ".rank-", ".json")
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			traces = append(traces, trace.AttemptTrace{Attempt: k, JSON: b})
		}
	}
	if len(traces) == 0 {
		return fmt.Errorf("no attempt wrote a timeline (%s)", attemptTimeline(file, 0))
	}
	var buf bytes.Buffer
	if err := trace.ConcatAttempts(&buf, traces); err != nil {
		return err
	}
	return regfile.WriteFile(file, buf.Bytes())
}
