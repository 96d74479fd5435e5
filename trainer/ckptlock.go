package trainer

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

// lockWait is how long a job waits for a folder's holder to let go (the
// ranks of a killed mpirun take a few seconds to die).
var lockWait = 10 * time.Second

// lockCheckpointDir takes dir's lock, waiting up to lockWait, and returns
// its release. A folder still held then is a ConfigError naming the holder.
func lockCheckpointDir(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, bad("Checkpoint", "Dir %s: %v", dir, err)
	}
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, bad("Checkpoint", "Dir %s: cannot open its lock file: %v", dir, err)
	}
	deadline := time.Now().Add(lockWait)
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
		return nil, bad("Checkpoint", "Dir %s is in use by %s (another job, or the ranks of one still running): give this job another --checkpoint-dir, or stop that one", dir, who)
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

// lockCheckpoints takes the checkpoint folder's lock on the reporting rank
// (every rank learns whether it could: AgreeToStart) and returns its
// release (a no-op elsewhere, and without a folder).
func (t *Trainer) lockCheckpoints(cfg Config) (func(), error) {
	ck := t.Checkpoint
	if ck == nil || ck.Dir == "" {
		return func() {}, nil
	}
	unlock, err := func() {}, error(nil)
	if t.Comm.Rank() == cfg.ReportingRank() {
		unlock, err = lockCheckpointDir(ck.Dir)
	}
	if err := AgreeToStart(t.Comm, "lock its --checkpoint-dir", err, 0); err != nil {
		if unlock != nil { // nil where this rank's own lock failed
			unlock()
		}
		return nil, err
	}
	return unlock, nil
}
