package engine

import "github.com/dml-project/dml/trainer/ckpt"

// A checkpoint folder belongs to one job at a time (ckpt.LockDir).

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
		unlock, err = ckpt.LockDir(ck.Dir)
		if err != nil {
			err = bad("Checkpoint", "%v", err)
		}
	}
	if err := AgreeToStart(t.Comm, "lock its --checkpoint-dir", err, 0); err != nil {
		if unlock != nil { // nil where this rank's own lock failed
			unlock()
		}
		return nil, err
	}
	return unlock, nil
}
