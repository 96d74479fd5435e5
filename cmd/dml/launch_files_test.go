package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAttemptFilesExact (issue 29): the files an earlier launch's
// --timeline left are matched by name, not by a glob of the flag's text:
// 'run[1].json' must not take run1.json's attempts, nor '*' every file.
func TestAttemptFilesExact(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{
		"run[1].json.attempt-0.json", "run[1].json.attempt-12.json", "run[1].json.attempt-0.json.rank-3.json",
		"run1.json.attempt-0.json", "run[1].json.attempt-x.json", "run[1].json.attempt-.json", "other.attempt-1.json",
		"*.attempt-0.json", "a.attempt-0.json",
	} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	names := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		slices.Sort(out)
		return out
	}
	got := names(attemptFiles(filepath.Join(dir, "run[1].json")))
	want := []string{"run[1].json.attempt-0.json", "run[1].json.attempt-0.json.rank-3.json", "run[1].json.attempt-12.json"}
	if !slices.Equal(got, want) {
		t.Errorf("run[1].json: %v, want %v", got, want)
	}
	if got := names(attemptFiles(filepath.Join(dir, "*"))); !slices.Equal(got, []string{"*.attempt-0.json"}) {
		t.Errorf("*: %v, want only the file named *.attempt-0.json", got)
	}
	if got := attemptFiles(filepath.Join(dir, "missing", "x.json")); len(got) != 0 {
		t.Errorf("a missing folder: %v", got)
	}
}

// TestDiscoveryBounded (issue 29): a discovery command that prints without
// end is cut at maxDiscoveryBytes and refused, one that prints no host
// name (NUL bytes, symbols) is refused naming the line, and a good one
// still works.
func TestDiscoveryBounded(t *testing.T) {
	for _, c := range []struct{ cmd, want string }{
		{"yes localhost", "printed more than"},
		{"head -c 1000 /dev/zero", "not a host name"},
		{"echo 'bad_host!'", "not a host name"},
		{"echo '-dash'", "not a host name"},
	} {
		if _, err := discoverHosts(c.cmd); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.cmd, err, c.want)
		}
	}
	hosts, err := discoverHosts("printf 'node-1:2\\n# a comment\\n10.0.0.7\\nn2.example.org:4\\n'")
	if err != nil || len(hosts) != 3 || hosts[0].Slots != 2 || hosts[1].Name != "10.0.0.7" || hosts[2].Slots != 4 {
		t.Errorf("good hosts: %+v, %v", hosts, err)
	}
}

// TestLaunchDeathStopsJob (issue 29): dml launch killed with SIGKILL
// cannot stop its job itself; the launcher it started gets SIGTERM then
// (a parent-death signal) instead of running on unsupervised.
func TestLaunchDeathStopsJob(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	fake := filepath.Join(dir, "launcher.sh")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho $$ > "+pidFile+"\nexec sleep 300\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(dmlBin, "launch", "--np", "1", "--launcher", fake, "--", "train", "--checkpoint-dir", filepath.Join(dir, "ck"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	var pid int
	for deadline := time.Now().Add(20 * time.Second); pid == 0; {
		if b, err := os.ReadFile(pidFile); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the launcher did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	alive := func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		// A zombie waiting for its new parent to reap it is dead too.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		return len(f) > 0 && f[0] != "Z"
	}
	for deadline := time.Now().Add(10 * time.Second); alive(); {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("the launcher runs on 10 s after dml launch was killed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStepsLostFromSurvivors (issue 29): the steps lost count from where
// the survivors had come, not from the dead rank's last record, which may
// be older than the checkpoint the job resumes from.
func TestStepsLostFromSurvivors(t *testing.T) {
	var errb strings.Builder
	sv := &supervisor{stderr: &errb}
	t0 := time.Now()
	prev := &attempt{Ranks: 3, Emergency: -1, ResumedSteps: 0, start: t0,
		Death: &deathEvent{Rank: 2, Host: "h3", Step: 662, FinderStep: 760}, death: t0.Add(time.Second)}
	next := &attempt{Ranks: 2, ResumedSteps: 700, firstStep: t0.Add(2 * time.Second)}
	sv.attempts = []*attempt{prev, next}
	sv.restarted(prev, next)
	if prev.StepsLost != 60 || !strings.Contains(errb.String(), "died in step 760 (last heard of in step 662)") || !strings.Contains(errb.String(), "60 step(s) lost") {
		t.Errorf("lost %d: %s", prev.StepsLost, errb.String())
	}
}
