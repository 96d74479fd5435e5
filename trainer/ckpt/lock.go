package ckpt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A checkpoint folder belongs to one job at a time: its reporting rank,
// which writes the checkpoints, holds an exclusive flock on
// DIR/.dml-lock for the job's life. Two jobs started in one folder used to
// delete each other's checkpoints half-way through their writes (issue
// 29); the lock also keeps the orphaned ranks of a killed mpirun from
// writing while dml launch's next attempt runs. The kernel releases the
// lock when its holder exits, however it exits: no lock is ever stale.

// lockName is the lock file inside a checkpoint folder.
const lockName = ".dml-lock"

// LockWait is how long a job waits for a folder's holder to let go (the
// ranks of a killed mpirun take a few seconds to die).
var LockWait = 10 * time.Second

// LockDir takes dir's lock (making dir where it is not), waiting up to
// LockWait, and returns its release. A folder still held then is an error
// naming the holder.
func LockDir(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("Dir %s: %v", dir, err)
	}
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("Dir %s: cannot open its lock file: %v", dir, err)
	}
	deadline := time.Now().Add(LockWait)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil || !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		who := strings.TrimSpace(string(holder))
		if who == "" {
			who = "another process"
		}
		return nil, fmt.Errorf("Dir %s is in use by %s (another job, or the ranks of one still running): give this job another --checkpoint-dir, or stop that one", dir, who)
	}
	host, _ := os.Hostname()
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("dml (pid %d on %s, since %s)\n", os.Getpid(), host, time.Now().Format(time.RFC3339))), 0)
	return func() {
		_ = f.Truncate(0)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
