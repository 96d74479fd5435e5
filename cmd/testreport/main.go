// Command testreport reads `go test -json` on standard input and prints what
// a person needs from it: the output of every failing test, each package's
// closing line (ok / FAIL / no test files) as go test prints it, and at the
// end every test that skipped, with its reason. A skip is never a silent
// pass.
//
// With -required PATTERN, a skip whose package, test name or reason matches
// the regular expression fails the run: `make test` passes the skips that
// must not happen in CI (MPI, numpy, Fashion-MNIST — `make deps` installs
// all three) when CI=true.
//
// The exit status is 1 when a test or package failed or a required test
// skipped, 2 on unreadable input, else 0.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type key struct{ pkg, test string }

// skip is one skipped test and the reason it printed.
type skip struct {
	key
	reason string
}

// report accumulates the events of one go test run.
type report struct {
	out      io.Writer
	output   map[key][]string // output of tests still running (and of packages)
	skips    []skip
	failed   int
	passed   int
	pkgFails int
}

func newReport(out io.Writer) *report {
	return &report{out: out, output: map[key][]string{}}
}

// add handles one event.
func (r *report) add(e event) {
	k := key{e.Package, e.Test}
	switch e.Action {
	case "output":
		r.output[k] = append(r.output[k], e.Output)
	case "pass":
		if e.Test == "" {
			r.flushPackage(k, "ok")
		} else {
			r.passed++
		}
		delete(r.output, k)
	case "skip":
		if e.Test == "" {
			r.flushPackage(k, "ok")
		} else {
			r.skips = append(r.skips, skip{k, skipReason(r.output[k])})
		}
		delete(r.output, k)
	case "fail":
		if e.Test == "" {
			r.pkgFails++
			r.flushPackage(k, "FAIL")
		} else {
			r.failed++
			for _, l := range r.output[k] {
				fmt.Fprint(r.out, l)
			}
		}
		delete(r.output, k)
	}
}

// flushPackage prints a package's own closing lines: the summary go test
// prints ("ok  pkg 1.2s", "?  pkg [no test files]", "FAIL pkg"), and on a
// failure everything the package printed outside its tests (a build error,
// a panic in TestMain).
func (r *report) flushPackage(k key, verdict string) {
	lines := r.output[k]
	for _, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case t == "PASS" || t == "FAIL" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- "):
			continue
		case strings.HasPrefix(t, "ok ") || strings.HasPrefix(t, "?") || strings.HasPrefix(t, "FAIL\t") || strings.HasPrefix(t, "FAIL "):
			fmt.Fprint(r.out, l)
		case verdict == "FAIL":
			fmt.Fprint(r.out, l)
		}
	}
}

// skipReason is what a skipped test printed (its t.Skip message), without
// go test's own "=== RUN" and "--- SKIP" lines.
func skipReason(lines []string) string {
	var msg []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		msg = append(msg, t)
	}
	if len(msg) == 0 {
		return "(no reason given)"
	}
	return strings.Join(msg, " ")
}

// summary prints the skip list and returns how many required tests skipped.
func (r *report) summary(required *regexp.Regexp) int {
	sort.Slice(r.skips, func(i, j int) bool {
		if r.skips[i].pkg != r.skips[j].pkg {
			return r.skips[i].pkg < r.skips[j].pkg
		}
		return r.skips[i].test < r.skips[j].test
	})
	bad := 0
	if len(r.skips) > 0 {
		fmt.Fprintf(r.out, "\n%d skipped:\n", len(r.skips))
		for _, s := range r.skips {
			mark := ""
			if required != nil && (required.MatchString(s.pkg) || required.MatchString(s.test) || required.MatchString(s.reason)) {
				mark = "  [REQUIRED: must not skip here]"
				bad++
			}
			fmt.Fprintf(r.out, "  %s %s: %s%s\n", s.pkg, s.test, s.reason, mark)
		}
	}
	fmt.Fprintf(r.out, "\n%d passed, %d failed, %d skipped\n", r.passed, r.failed, len(r.skips))
	return bad
}

func main() {
	req := flag.String("required", "", "regular expression: a skip whose package, test or reason matches fails the run")
	flag.Parse()
	var required *regexp.Regexp
	if *req != "" {
		var err error
		if required, err = regexp.Compile(*req); err != nil {
			fmt.Fprintf(os.Stderr, "testreport: -required: %v\n", err)
			os.Exit(2)
		}
	}
	r := newReport(os.Stdout)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// go test prints build failures as plain text before any JSON.
			fmt.Fprintln(os.Stdout, string(line))
			continue
		}
		r.add(e)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "testreport: reading go test -json: %v\n", err)
		os.Exit(2)
	}
	bad := r.summary(required)
	switch {
	case bad > 0:
		fmt.Printf("FAIL: %d required test(s) skipped (CI installs what they need: see `make deps`)\n", bad)
		os.Exit(1)
	case r.failed > 0 || r.pkgFails > 0:
		os.Exit(1)
	}
}
