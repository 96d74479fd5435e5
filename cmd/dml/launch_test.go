package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives/mpi"
	"github.com/dml-project/dml/internal/elastic"
	"github.com/dml-project/dml/internal/syncbuf"
)

// launchTrain is a short training command for dml launch: 3,000 synthetic
// samples, 63 steps per epoch on 3 ranks × batch 16.
func launchTrain(ck string) []string {
	return []string{"train", "--data", "synthetic", "--samples", "3000", "--features", "20", "--hidden", "16",
		"--epochs", "2", "--batch", "16", "--progress", "never", "--checkpoint-dir", ck,
		"--liveness", "60s"} // a death by SIGKILL is found at once; no false one on a loaded machine
}

// localLauncher is mpirun as the tests run it on one machine (shared
// memory only), for --launcher.
func localLauncher() string {
	argv := mpi.MpirunArgs(1, "PROGRAM")
	var out []string
	for i := 0; i < len(argv); i++ {
		switch argv[i] {
		case "-np":
			i++
		case "PROGRAM":
		default:
			out = append(out, argv[i])
		}
	}
	return strings.Join(out, " ")
}

// launchReport is --report's file.
type launchReport struct {
	OK        bool `json:"ok"`
	Restarts  int  `json:"restarts"`
	StepsLost int  `json:"steps_lost"`
	Attempts  []struct {
		Ranks        int `json:"ranks"`
		Emergency    int `json:"emergency_steps"`
		ResumedSteps int `json:"resumed_steps"`
		Death        *struct {
			Rank int `json:"rank"`
		} `json:"death"`
		RecoverySec float64 `json:"recovery_sec"`
	} `json:"attempts"`
}

func readLaunchReport(t *testing.T, path string) launchReport {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r launchReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("--report: %v\n%s", err, b)
	}
	return r
}

// TestLaunchRecovers is the kill-a-rank scenario on one machine (issue
// 20): rank 1 of 3 is killed with SIGKILL at step 40 (DML_TEST_KILL); the
// survivors write the state of the step they completed, dml launch leaves
// the slot out and relaunches on 2 ranks with --resume, which go on from
// that very step: one step of work lost (the one in flight), said in one
// restart line and in the report, and training ends normally.
func TestLaunchRecovers(t *testing.T) {
	dir := t.TempDir()
	ck, rep := filepath.Join(dir, "ck"), filepath.Join(dir, "report.json")
	t.Setenv("DML_TEST_KILL", "1:40:"+filepath.Join(dir, "killed"))
	tl := filepath.Join(dir, "timeline.json")
	args := append([]string{"launch", "--np", "3", "--min-np", "2", "--max-restarts", "1", "--report", rep, "--launcher", localLauncher(), "--"},
		append(launchTrain(ck), "--timeline", tl)...)
	r := dml(t, 0, args...)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// The timeline carries on: the survivors' own spans of attempt 0, the
	// merged ones of attempt 1, in one file.
	tlb, err := os.ReadFile(tl)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"attempt 0, rank 0"`, `"attempt 0, rank 2"`, `"attempt 1, rank 0"`, `"attempt 1, rank 1"`, `"name":"step"`} {
		if !bytes.Contains(tlb, []byte(want)) {
			t.Errorf("the timeline lacks %s", want)
		}
	}
	for _, want := range []string{"dml launch: restart 1: rank 1 on ", " died in step ", " (last heard of in step ", "2 rank(s) go on from step ",
		"(the survivors' emergency checkpoint), 1 step(s) lost, recovered in ", "dml launch: done after 1 restart(s): 1 step(s) of work lost in all"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, elastic.EventPrefix) {
		t.Errorf("dml launch passed its event lines through:\n%s", r.stderr)
	}
	if !strings.Contains(r.stdout, "the rest of the epoch goes to these 2") || !strings.Contains(r.stdout, "done: ") {
		t.Errorf("the 2-rank job did not resume inside the epoch and end:\n%s", r.stdout)
	}
	got := readLaunchReport(t, rep)
	if !got.OK || got.Restarts != 1 || got.StepsLost != 1 || len(got.Attempts) != 2 {
		t.Fatalf("report %+v", got)
	}
	a, b := got.Attempts[0], got.Attempts[1]
	if a.Ranks != 3 || b.Ranks != 2 || a.Death == nil || a.Death.Rank != 1 || a.Emergency < 39 || b.ResumedSteps != a.Emergency || a.RecoverySec <= 0 {
		t.Errorf("attempts %+v %+v: want 3 ranks, rank 1 dead, an emergency checkpoint at step ≥ 39 (step 40 was in flight) that 2 ranks resumed from", a, b)
	}
	// The emergency checkpoint is marked as such.
	meta := checkpointMeta(t, filepath.Join(ck, fmt.Sprintf("ckpt-s%09d.npz", a.Emergency)))
	if !strings.Contains(meta, `"emergency"`) || !strings.Contains(meta, `"dead_rank": 1`) {
		t.Errorf("the emergency checkpoint's meta.json is not marked:\n%s", meta)
	}
}

// TestLaunchRecoversPS: under --sync ps with 2 servers, a worker killed
// in step 40: both servers hold every key range (their own and the
// other's replica) and write the emergency checkpoint, the surviving
// worker has nothing to say, and the job goes on with 2 servers and 1
// worker from it, 1 step lost.
func TestLaunchRecoversPS(t *testing.T) {
	dir := t.TempDir()
	ck, rep := filepath.Join(dir, "ck"), filepath.Join(dir, "report.json")
	t.Setenv("DML_TEST_KILL", "3:40:"+filepath.Join(dir, "killed"))
	args := append([]string{"launch", "--np", "4", "--min-np", "3", "--max-restarts", "1", "--report", rep, "--launcher", localLauncher(), "--"},
		append(launchTrain(ck), "--sync", "ps", "--servers", "2")...)
	r := dml(t, 0, args...)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	got := readLaunchReport(t, rep)
	if !got.OK || got.Restarts != 1 || got.StepsLost != 1 || len(got.Attempts) != 2 {
		t.Fatalf("report %+v\nstderr:\n%s", got, r.stderr)
	}
	a, b := got.Attempts[0], got.Attempts[1]
	if a.Death == nil || a.Death.Rank != 3 || a.Emergency < 39 || b.Ranks != 3 || b.ResumedSteps != a.Emergency {
		t.Errorf("attempts %+v %+v: want rank 3 dead, the servers' emergency checkpoint at step ≥ 39 resumed by 3 ranks", a, b)
	}
	meta := checkpointMeta(t, filepath.Join(ck, fmt.Sprintf("ckpt-s%09d.npz", a.Emergency)))
	if !strings.Contains(meta, `"emergency"`) || !strings.Contains(meta, `"dead_rank": 3`) {
		t.Errorf("the emergency checkpoint's meta.json is not marked:\n%s", meta)
	}
}

// TestLaunchGivesUp: with --min-np 3, the death of one of 3 ranks leaves
// too few: dml launch stops with the job's last error, exit 1, without a
// restart.
func TestLaunchGivesUp(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DML_TEST_KILL", "2:20:"+filepath.Join(dir, "killed"))
	args := append([]string{"launch", "--np", "3", "--min-np", "3", "--launcher", localLauncher(), "--"}, launchTrain(filepath.Join(dir, "ck"))...)
	t0 := time.Now()
	r := dml(t, 0, args...)
	if r.code != 1 || !strings.Contains(r.stderr, "launch: 2 rank(s) left, below --min-np 3: giving up: the job's last error: rank 2 (pid ") {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "restart 1") {
		t.Errorf("restarted below --min-np:\n%s", r.stderr)
	}
	t.Logf("ended in %v", time.Since(t0).Round(time.Millisecond))
}

// checkpointMeta is a checkpoint's meta.json.
func checkpointMeta(t *testing.T, path string) string {
	t.Helper()
	z, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	for _, f := range z.File {
		if f.Name == "meta.json" {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			return string(b)
		}
	}
	t.Fatalf("%s has no meta.json", path)
	return ""
}

// TestLaunchUsage: what cannot run is refused in one line, exit 2, before
// anything starts.
func TestLaunchUsage(t *testing.T) {
	ok := []string{"--", "train", "--checkpoint-dir", t.TempDir()}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "nothing to run"},
		{[]string{"--np", "2"}, "nothing to run"},
		{[]string{"--np", "2", "--", "eval"}, `"eval": dml launch supervises dml train`},
		{ok, "give --np N (ranks on this machine), --hosts h1:2,h2:2 or --host-discovery CMD"},
		{append([]string{"--np", "2", "--hosts", "a:1"}, ok...), "give one of --np, --hosts and --host-discovery"},
		{append([]string{"--hosts", "a:1", "--host-discovery", "true"}, ok...), "give one of --np, --hosts and --host-discovery"},
		{append([]string{"--hosts", "a:1", "--discover-every", "0s"}, ok...), "--discover-every 0s"},
		{[]string{"--np", "2", "--", "train", "--sync", "adpsgd", "--checkpoint-dir", "x"}, "--sync adpsgd cannot be stopped at a step boundary"},
		{[]string{"--np", "2", "--", "train", "--checkpoint-dir="}, "needs --checkpoint-dir"},
		{[]string{"--np", "2", "--", "train", "--checkpoint-dir"}, "the training command: flag needs an argument: -checkpoint-dir"},
		{[]string{"--np", "2", "--", "train", "--checkpoint-dir", "x", "--epochs", "many"}, `the training command: invalid value "many" for flag -epochs`},
		{[]string{"--np", "2", "--", "train", "--checkpoint-dir", "x", "--sync", "gossip"}, `the training command: invalid value "gossip" for flag -sync`},
		{append([]string{"--np", "-1"}, ok...), "--np -1"},
		{append([]string{"--np", "2", "--min-np", "3"}, ok...), "--min-np 3 is more than the 2 slot(s)"},
		{append([]string{"--hosts", "a:2,b:1", "--min-np", "4"}, ok...), "--min-np 4 is more than the 3 slot(s)"},
		{append([]string{"--hosts", "a:2,a:1"}, ok...), "host a is given twice"},
		{append([]string{"--hosts", "a:0"}, ok...), `slots "0"`},
		{append([]string{"--hosts", "a,,b"}, ok...), "an empty host"},
		{append([]string{"--np", "2", "--max-np", "1", "--min-np", "2"}, ok...), "--max-np 1 is below --min-np 2"},
		{append([]string{"--np", "2", "--max-restarts", "-1"}, ok...), "--max-restarts -1"},
		{append([]string{"--np", "2", "--min-np", "0"}, ok...), "--min-np 0"},
		{append([]string{"--np", "2", "--liveness", "10ms"}, ok...), "--liveness 10ms"},
		{[]string{"--np", "2", "--", "train", "--epochs", "1"}, "needs --checkpoint-dir"},
		{append([]string{"--np", "2", "--bogus"}, ok...), "flag provided but not defined: -bogus"},
		// Launch's outputs, before anything runs (issue 29).
		{append([]string{"--np", "2", "--report", t.TempDir()}, ok...), "--report"},
		{append([]string{"--np", "2", "--report", filepath.Join(t.TempDir(), "no", "r.json")}, ok...), "does not exist"},
		{append([]string{"--np", "2", "--report", fifo}, ok...), "--report " + fifo},
		{[]string{"--np", "2", "--", "train", "--checkpoint-dir", t.TempDir(), "--timeline", fifo}, "--timeline " + fifo},
	} {
		var so, se strings.Builder
		code := run(append([]string{"launch"}, tc.args...), &so, &se)
		if code != 2 || !strings.Contains(se.String(), tc.want) {
			t.Errorf("launch %v: exit %d, stderr %q; want 2 and %q", tc.args, code, se.String(), tc.want)
		}
	}
}

// TestLaunchGrows: a host count that --host-discovery raises while the job
// runs (here the command's second answer) is taken in at a step boundary:
// the job stops there with a checkpoint (SIGUSR1, passed on by mpirun) and
// goes on larger from that checkpoint; a growth is no restart.
func TestLaunchGrows(t *testing.T) {
	dir := t.TempDir()
	rep, marker := filepath.Join(dir, "report.json"), filepath.Join(dir, "asked")
	discover := fmt.Sprintf("if [ -e %[1]s ]; then echo localhost:3; else echo localhost:2; touch %[1]s; fi", marker)
	train := launchTrain(filepath.Join(dir, "ck"))
	train[slices.Index(train, "--epochs")+1] = "200"
	train = append(train, "--max-steps", "1500")
	args := append([]string{"launch", "--host-discovery", discover, "--discover-every", "20ms", "--report", rep, "--launcher", localLauncher(), "--"}, train...)
	r := dml(t, 0, args...)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"dml launch: 1 slot(s) more to take in: stopping the job at the next step boundary",
		"dml launch: grew: 3 rank(s) go on from step ", "done after 0 restart(s) and 1 time(s) grown: 0 step(s) of work lost"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	got := readLaunchReport(t, rep)
	if !got.OK || got.Restarts != 0 || len(got.Attempts) != 2 || got.Attempts[0].Ranks != 2 || got.Attempts[1].Ranks != 3 || got.Attempts[1].ResumedSteps <= 0 || got.Attempts[1].ResumedSteps >= 1500 {
		t.Errorf("report %+v", got)
	}
}

// TestLaunchInterrupted: SIGINT to dml launch (not to its job: a process
// group of its own) stops the job at a step boundary with a checkpoint,
// and dml launch ends with 130, without a restart.
func TestLaunchInterrupted(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	train := launchTrain(ck)
	train[slices.Index(train, "--epochs")+1] = "100000"
	argv := append([]string{dmlBin, "launch", "--np", "2", "--launcher", localLauncher(), "--"}, train...)
	j := startJob(t, argv, func(j *job) bool { return strings.Contains(j.so.String(), "epoch") })
	code, so, se := j.interrupt(t)
	files, _ := filepath.Glob(filepath.Join(ck, "ckpt-s*.npz"))
	if code != 130 || !strings.Contains(so, "interrupted after step") || len(files) == 0 || strings.Contains(se, "restart 1") {
		t.Fatalf("exit %d (want 130), checkpoints %v\nstdout:\n%s\nstderr:\n%s", code, files, so, se)
	}
}

// TestLaunchDiscoveryFailsAtStart: a discovery command that fails at the
// start is a usage error naming the flag.
func TestLaunchDiscoveryFailsAtStart(t *testing.T) {
	var so, se strings.Builder
	if code := run([]string{"launch", "--host-discovery", "exit 3", "--", "train", "--checkpoint-dir", t.TempDir()}, &so, &se); code != 2 || !strings.Contains(se.String(), "--host-discovery") {
		t.Errorf("a failing discovery at the start: exit %d, %q", code, se.String())
	}
}

// TestLaunchInterruptedWhileDiscovering (issue 29): a --host-discovery
// command that hangs does not hold up the supervisor: SIGINT to dml launch
// while the command runs stops the job at once (before the command ends),
// as without discovery.
func TestLaunchInterruptedWhileDiscovering(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	first, started, ended := filepath.Join(dir, "first"), filepath.Join(dir, "started"), filepath.Join(dir, "ended")
	discover := fmt.Sprintf("if [ -e %[1]s ]; then touch %[2]s; sleep 8; touch %[3]s; fi; touch %[1]s; echo localhost:2", first, started, ended)
	train := launchTrain(ck)
	train[slices.Index(train, "--epochs")+1] = "100000"
	argv := append([]string{dmlBin, "launch", "--host-discovery", discover, "--discover-every", "20ms", "--launcher", localLauncher(), "--"}, train...)
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	j := startJob(t, argv, func(j *job) bool { return strings.Contains(j.so.String(), "epoch") && exists(started) })
	if exists(ended) {
		j.interrupt(t)
		t.Skip("the machine took 8 s from the discovery's start to here: nothing to tell")
	}
	code, _, se := j.interrupt(t)
	if exists(ended) {
		t.Errorf("dml launch ended after the hanging discovery did: the SIGINT waited for it\n%s", se)
	}
	if code != 130 {
		t.Errorf("exit %d, want 130\n%s", code, se)
	}
}

// job is a dml launch started by startJob.
type job struct {
	cmd    *exec.Cmd
	so, se syncbuf.Buffer
	done   chan error
}

// startJob starts argv and waits, up to a minute, until ready says so.
func startJob(t *testing.T, argv []string, ready func(*job) bool) *job {
	t.Helper()
	j := &job{cmd: exec.Command(argv[0], argv[1:]...), done: make(chan error, 1)}
	j.cmd.Stdout, j.cmd.Stderr = &j.so, &j.se
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { j.done <- j.cmd.Wait() }()
	deadline := time.After(time.Minute)
	for !ready(j) {
		select {
		case err := <-j.done:
			t.Fatalf("ended (%v) before it was ready\n%s\n%s", err, j.so.String(), j.se.String())
		case <-deadline:
			j.cmd.Process.Kill()
			t.Fatalf("not ready in a minute\n%s\n%s", j.so.String(), j.se.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return j
}

// interrupt sends SIGINT and waits, up to a minute, for the end: the exit
// code and the output.
func (j *job) interrupt(t *testing.T) (code int, stdout, stderr string) {
	t.Helper()
	j.cmd.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case err = <-j.done:
	case <-time.After(time.Minute):
		j.cmd.Process.Kill()
		t.Fatalf("still running a minute after SIGINT\n%s", j.se.String())
	}
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return code, j.so.String(), j.se.String()
}
