package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

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
