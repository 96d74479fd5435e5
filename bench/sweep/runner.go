package sweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dml-project/dml/internal/regfile"
)

// Runner launches the runs of a sweep, each as its own MPI job, and
// measures them.
type Runner struct {
	Launcher []string // the Spec's launcher
	Binary   string   // the dml binary (cmd/dml passes os.Executable())
	Env      []string // added to the environment of every launch
	Timeout  time.Duration
	Target   float64
	// Profile, if set, is every run's --profile mode (cpu, mem, …): each
	// rank's rank-R.MODE.pprof goes into runs/ID/.
	Profile string
	// Timeline gives every run --timeline runs/ID/timeline.json.
	Timeline bool
	// Dir receives runs/ID/{log.txt,metrics.jsonl,report.rank-R.json}.
	Dir string
	// Progress, if not nil, receives a line as each run starts and ends.
	Progress io.Writer
}

// LogTailBytes is how much of a failed run's output its row keeps.
const LogTailBytes = 2000

// Do launches run and returns its measured row (Status OK or Failed);
// ctx cancels it.
func (r *Runner) Do(ctx context.Context, run Run) Row {
	dir := filepath.Join(r.Dir, "runs", run.ID)
	row := NewRow(run, Failed)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		row.Reason = err.Error()
		return row
	}
	metrics := filepath.Join(dir, "metrics.jsonl")
	report := filepath.Join(dir, "report")
	logPath := filepath.Join(dir, "log.txt")
	// Files of an earlier sweep into the same folder must not count.
	os.Remove(metrics)
	if old, _ := filepath.Glob(report + ".rank-*.json"); len(old) > 0 {
		for _, p := range old {
			os.Remove(p)
		}
	}
	outs := []string{"--metrics", metrics, "--run-report", report}
	if r.Profile != "" {
		outs = append(outs, "--profile", r.Profile, "--profile-dir", dir)
	}
	if r.Timeline {
		tl := filepath.Join(dir, "timeline.json")
		os.Remove(tl)
		outs = append(outs, "--timeline", tl)
	}
	args := LauncherArgs(r.Launcher, r.Binary, run, outs...)
	row.Command = shellQuote(args)
	logF, err := regfile.Create(logPath)
	if err != nil {
		row.Reason = err.Error()
		return row
	}
	defer logF.Close()
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logF, logF
	cmd.Env = append(os.Environ(), r.Env...)
	// The launcher and what it starts are one process group, ended
	// together on a timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	if ctx.Err() != nil && cmd.Process != nil {
		// A launcher killed on its timeout may leave ranks of its group.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	epochs, merr := ReadMetrics(metrics)
	reports, rerr := ReadReports(report)
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		row.Reason = fmt.Sprintf("timed out after %v", r.Timeout)
	case err != nil:
		row.Reason = fmt.Sprintf("exited: %v", err)
		if msg := lastError(logPath); msg != "" {
			row.Reason += ": " + msg
		}
	case merr != nil:
		row.Reason = fmt.Sprintf("no metrics: %v", merr)
	case len(epochs) == 0:
		row.Reason = "no epoch in the metrics file"
	case rerr != nil:
		row.Reason = fmt.Sprintf("rank reports: %v", rerr)
	default:
		row.Status = OK
	}
	if row.Status != OK {
		logF.Sync()
		row.LogTail = tail(logPath, LogTailBytes)
		if errors.Is(ctx.Err(), context.Canceled) {
			row.Reason = "cancelled"
		}
	}
	row = Aggregate(row, epochs, reports, r.Target)
	if row.Status == OK && len(reports) != run.Ranks {
		row.Reason = fmt.Sprintf("%d of %d rank reports", len(reports), run.Ranks)
	}
	return row
}

// lastError is the last "dml: …" line of a run's log, the message of the
// rank that failed; else the last "WORD: message" line (a launcher's).
func lastError(path string) string {
	dml, other := "", ""
	for _, l := range strings.Split(tail(path, 64<<10), "\n") {
		switch word, _, ok := strings.Cut(l, ": "); {
		case strings.HasPrefix(l, "dml: "):
			dml = strings.TrimPrefix(l, "dml: ")
		case ok && word != "" && !strings.ContainsAny(word, " \t-["):
			other = l
		}
	}
	if dml != "" {
		return dml
	}
	return other
}

// tail returns the last n bytes of the file at path (from a line start
// where one is near).
func tail(path string, n int64) string {
	f, err := regfile.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(0, st.Size()-n)
	b := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && err != io.EOF {
		return ""
	}
	s := string(b)
	if off > 0 {
		if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
	}
	return strings.TrimRight(s, "\n")
}

// shellQuote joins args as a shell would need them typed.
func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:,=+@%", r))
		}) < 0 {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
