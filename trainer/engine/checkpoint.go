package engine

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/internal/regfile"
	"github.com/dml-project/dml/trainer/atomicfile"
	"github.com/dml-project/dml/trainer/ckpt"
	"github.com/dml-project/dml/trainer/model"
	"github.com/dml-project/dml/trainer/trace"
)

// Checkpoints and clean stops: what every strategy shares. What is a
// strategy's own (its state, its metadata, its compatibility checks, how
// its ranks take their part on resuming, its stop vote) is in its unit
// (strategy.go and sync_*.go).
//
// A checkpoint is written at a step boundary by the reporting rank, from
// the state the strategy's saveState collects (Hooks.SaveState), as one .npz
// file (checkpoint_file.go), atomically; the newest Keep stay. The sample
// order is a pure function of (seed, shard, epoch), so the Position is the
// data-order position.
//
// Resuming: rank 0 reads the checkpoint (the newest valid one in the
// folder, or the file named), checks it against this job (configuration
// hash, model, ranks, optimizer, and the strategy's own checks) and
// broadcasts the weights and optimizer state; the strategy's unit hands
// out the rest (resume).
//
// Stopping (Trainer.Stop): the ranks that train vote at every step boundary
// whether any of them wants to stop, so that all stop after the same step:
// a one-float AllReduce over every rank (voteAll), unless the strategy
// votes its own way (Hooks.VoteStop: ps).

// ErrCheckpoint marks a checkpoint that was refused for resuming (also
// wrapping ErrUsage: every rank finds it alike, rank 0 says why).
var ErrCheckpoint = errors.New("checkpoint refused")

// checkpointHash fingerprints the settings that decide the weights a
// number of steps leads to: the Config without how long training runs, how
// often it evaluates, where outputs go, and per-process settings.
func checkpointHash(c Config) uint64 {
	c.Epochs, c.MaxSteps, c.EvalEvery = 0, 0, 0
	c.Straggle = Straggle{Rank: -1}
	c.Overlap, c.Timeout, c.Metrics, c.Save = false, 0, "", ""
	c.PS.ReplicateEvery = 0 // replication changes no weight
	return c.Hash()
}

// boundary runs at the step boundary before next: the stop vote, then the
// checkpoint when one is due or the job stops. It returns whether to stop.
func (j *Job) boundary(s Strategy, next Position) (bool, error) {
	if j.LW != nil {
		if err := j.LW.boundary(next); err != nil {
			return false, err
		}
	}
	stop := false
	if j.Stop != nil {
		collectives.EnterOp(j.Comm, "stop vote")
		sp := j.Trace.Begin("stop-vote").Cat(trace.Wait)
		var err error
		if vote := s.Hooks().VoteStop; vote != nil {
			stop, err = vote(j.Stop())
		} else {
			stop, err = voteAll(j.Comm, j.Stop())
		}
		sp.Err(err).End()
		if err != nil {
			return false, fmt.Errorf("agreeing on a stop: %w", err)
		}
	}
	if ck := j.Checkpoint; ck.Due(next) || stop && ck.Enabled() {
		sp := j.Trace.Begin("checkpoint").Cat(trace.IO)
		err := j.writeCheckpoint(s, next)
		sp.Err(err).End()
		if err != nil {
			return false, err
		}
	}
	return stop, nil
}

// voteAll ORs every rank's flag with a one-float AllReduce.
func voteAll(c collectives.Comm, local bool) (bool, error) {
	if c.Size() == 1 {
		return local, nil
	}
	v := []float32{0}
	if local {
		v[0] = 1
	}
	if err := collectives.Allreduce(c, v, collectives.Sum, collectives.Tree); err != nil {
		return false, err
	}
	return v[0] > 0, nil
}

// writeCheckpoint saves the state at the boundary before next.
func (j *Job) writeCheckpoint(s Strategy, next Position) error {
	h := s.Hooks()
	if h.SaveState == nil {
		return fmt.Errorf("checkpoints: %T cannot write them", s)
	}
	t0 := time.Now()
	j.lastCheckpointSteps = next.Steps
	c, err := h.SaveState()
	if err != nil {
		return err
	}
	// A network's batch-norm statistics: every rank that trains takes
	// part (Hooks.ModelState), the reporting rank keeps them.
	if h.ModelState != nil {
		st, err := h.ModelState()
		if err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if c != nil {
			c.Buffers = st
		}
	}
	if c == nil {
		return nil
	}
	c.Meta = j.checkpointMeta(c.Meta, next)
	b, err := c.Encode()
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	path := filepath.Join(j.Checkpoint.Dir, ckpt.Name(next.Steps))
	if err := ckpt.WriteAtomic(path, b); err != nil {
		return fmt.Errorf("Checkpointing.Dir: writing %s: %w", path, err)
	}
	j.markValid(path, len(b))
	j.prune()
	j.printf("checkpoint: step %d (epoch %d step %d) written to %s (%.1f MB, %.0f ms)\n",
		next.Steps, next.Epoch, next.Step, path, float64(len(b))/1e6, 1e3*time.Since(t0).Seconds())
	j.lastCheckpoint = path
	return nil
}

// prune removes the checkpoints older than the newest Keep valid ones
// (failures are ignored: an extra old file hurts nobody). A file with a
// checkpoint's name that does not read as one (empty, truncated, a link
// to a device, another program's) is not counted and is left alone, said
// once: pruning by names alone once kept a bogus newest name and deleted
// every good checkpoint (issue 29).
func (j *Job) prune() {
	keep := j.Checkpoint.Keep
	if keep <= 0 {
		keep = DefaultKeep
	}
	files, err := ckpt.List(j.Checkpoint.Dir)
	if err != nil {
		return
	}
	kept := 0
	for _, f := range files {
		switch {
		case kept >= keep:
			os.Remove(f)
		case j.validCheckpoint(f):
			kept++
		}
	}
	j.removeLeftovers()
}

// markValid records a checkpoint this job has just written (valid without
// reading it back); its size bounds what validCheckpoint reads.
func (j *Job) markValid(path string, size int) {
	if fi, err := os.Stat(path); err == nil {
		j.remember(path, fi, true)
	}
	j.ckptSize = max(j.ckptSize, int64(size))
}

// remember records what prune knows of the file at path as fi shows it.
func (j *Job) remember(path string, fi os.FileInfo, valid bool) {
	if j.ckptSeen == nil {
		j.ckptSeen = map[string]ckptSeen{}
	}
	j.ckptSeen[path] = ckptSeen{fi.Size(), fi.ModTime(), valid}
}

// validCheckpoint reports whether path reads and decodes as a checkpoint
// (a regular file of at most 4× the largest this job wrote and 16 MiB
// more), once per file and version.
func (j *Job) validCheckpoint(path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	if s, ok := j.ckptSeen[path]; ok && s.size == fi.Size() && s.mtime.Equal(fi.ModTime()) {
		return s.valid
	}
	b, err := regfile.ReadFile(path, 4*j.ckptSize+16<<20)
	valid := err == nil
	if valid {
		_, err = ckpt.Decode(b)
		valid = err == nil
	}
	if !valid {
		j.printf("checkpoint: %s does not read as a checkpoint (%v): not counted among the --keep newest, left alone\n", path, err)
	}
	j.remember(path, fi, valid)
	return valid
}

// removeLeftovers removes what checkpoint writes killed half-way left in
// the folder (atomicfile's .ckpt-s….npz.tmp-* files), saying so when there
// were any. Only the reporting rank writes checkpoints, one at a time, so
// no write of this job is under way when it runs.
func (j *Job) removeLeftovers() {
	removed, err := atomicfile.RemoveLeftovers(j.Checkpoint.Dir, ckpt.IsName)
	if err == nil && len(removed) > 0 {
		j.printf("removed %d temporary file(s) of interrupted checkpoint writes from %s (%s)\n", len(removed), j.Checkpoint.Dir, strings.Join(removed, ", "))
	}
}

// ListCheckpoints returns the checkpoint files in dir, newest first.
func ListCheckpoints(dir string) ([]string, error) { return ckpt.List(dir) }

// checkpointMeta describes this job at position pos, from what the
// strategy's saveState said of it (from: the model's Arch, Downpour's
// Pushes).
func (j *Job) checkpointMeta(from checkpointMeta, pos Position) checkpointMeta {
	cfg := j.Cfg
	m := checkpointMeta{
		Format: ckpt.Format, Version: ckpt.Version, ConfigHash: fmt.Sprintf("%016x", checkpointHash(cfg)),
		Model: cfg.Model.String(), Arch: from.Arch, Optimizer: cfg.Opt.Kind.String(), Sync: cfg.Sync.String(),
		Ranks: j.Comm.Size(), Workers: j.Sched.Ranks, Position: pos, Pushes: from.Pushes,
	}
	if len(pos.Reshard) > 0 {
		m.Version = ckpt.ReshardVersion
	}
	UnitOf(cfg.Sync).CheckpointMeta(j, &m)
	if !model.IdentityLabels(j.labels) {
		m.ClassLabels = j.labels
	}
	return m
}

// compatible says why checkpoint c cannot resume this job ("" if it can).
func (j *Job) compatible(c *checkpoint, arch model.Arch) string {
	m, cfg := &c.Meta, j.Cfg
	switch {
	case m.Sync != cfg.Sync.String():
		return fmt.Sprintf("it was written by a job with Config.Sync %s, this one has %v", m.Sync, cfg.Sync)
	case !m.Arch.Equal(arch):
		return fmt.Sprintf("it is of another model (%s), this job builds %s", m.Arch.Describe(), arch.Describe())
	case !sameLabels(m.ClassLabels, j.labels):
		return fmt.Sprintf("its classes stand for labels %v, this job's data's for %v", m.ClassLabels, j.labels)
	case m.Optimizer != cfg.Opt.Kind.String():
		return fmt.Sprintf("it holds %s optimizer state, this job uses %v", m.Optimizer, cfg.Opt.Kind)
	case m.Ranks != j.Comm.Size() && !UnitOf(cfg.Sync).Reshards(cfg):
		return fmt.Sprintf("it was written by a job of %d ranks, this one has %d (under --sync %v the data shards and the global batch depend on it; --sync allreduce and dpsgd, and ps under bsp, resume on another number of ranks)", m.Ranks, j.Comm.Size(), cfg.Sync)
	case m.Workers < 1 || m.Workers > j.Sched.N:
		return fmt.Sprintf("it names %d training ranks for %d samples", m.Workers, j.Sched.N)
	case m.Workers != j.Sched.Ranks && j.trainSrc == nil:
		return fmt.Sprintf("it was written by %d training ranks, this job has %d: only dense data is dealt to another number of them", m.Workers, j.Sched.Ranks)
	}
	if why := UnitOf(cfg.Sync).Compatible(j, c); why != "" {
		return why
	}
	if err := checkSegments(m.Reshard, j.Sched.N); err != nil {
		return err.Error()
	}
	// Under ps the number of servers may differ (the unit said whether),
	// and on another number of training ranks the batch, where a small
	// data set capped it at the largest shard (newSchedule): the hash is
	// compared with the checkpoint's.
	hc := cfg
	hc.Batch = j.batchOf(m.Workers)
	if cfg.Sync == SyncPS {
		hc.PS.Servers = m.Servers
	}
	switch {
	case m.ConfigHash != fmt.Sprintf("%016x", checkpointHash(hc)):
		return fmt.Sprintf("it was written with other training settings (configuration hash %s, this job's %016x: model, data, batch, seed, optimizer, sync and their parameters must match; Config.Epochs and Config.MaxSteps may differ)",
			m.ConfigHash, checkpointHash(hc))
	case m.Epoch < 1 || m.Step < 0 || m.Steps < 0 || m.Step >= j.stepsOf(m):
		return fmt.Sprintf("bad position: epoch %d step %d, %d steps run", m.Epoch, m.Step, m.Steps)
	}
	return ""
}

// batchOf is the batch per rank a job of workers training ranks ran at:
// --batch (times --accumulate), capped at the largest shard (newSchedule).
func (j *Job) batchOf(workers int) int {
	return newSchedule(j.Sched.N, workers, stepBatch(j.askedBatch, j.Cfg.Accumulate)).Batch
}

// stepsOf is the steps of the epoch checkpoint m is in, as the job that
// wrote it ran them (its ranks, its batch, and how the epoch was begun).
func (j *Job) stepsOf(m *checkpointMeta) int {
	b := j.batchOf(m.Workers)
	if len(m.Reshard) == 0 {
		return newSchedule(j.Sched.N, m.Workers, b).StepsPerEpoch()
	}
	return partSteps(epochParts(j.Sched.N, j.Cfg.Seed, m.Epoch, j.Cfg.Shuffle, m.Reshard, m.Workers), b)
}

// sameLabels reports whether two class-label mappings are the same (nil
// and the identity are).
func sameLabels(a, b []int64) bool {
	if model.IdentityLabels(a) && model.IdentityLabels(b) {
		return true
	}
	return slices.Equal(a, b)
}

// readCheckpoint reads and checks one file.
func (j *Job) readCheckpoint(path string, arch model.Arch) (*checkpoint, error) {
	// No checkpoint of this model holds more than its weights, optimizer
	// state (at most two vectors as large) and a filter residue per rank,
	// plus small metadata: a larger file (or a device, a FIFO) is refused
	// before it is read.
	n := int64(arch.NumParams()) * 4
	b, err := regfile.ReadFile(path, n*int64(3+j.Comm.Size())+16<<20)
	if err != nil {
		return nil, err
	}
	c, err := ckpt.Decode(b)
	if err != nil {
		return nil, err
	}
	if why := j.compatible(c, arch); why != "" {
		return nil, errors.New(why)
	}
	return c, nil
}

// pickCheckpoint finds what to resume from (on rank 0): the file named, or
// the newest valid one in the folder, telling on Out which it skipped and
// why. It returns nil (start fresh) when the folder holds no checkpoint.
func (j *Job) pickCheckpoint(arch model.Arch) (*checkpoint, string, error) {
	ck := j.Checkpoint
	say := func(format string, args ...any) {
		if j.Out != nil {
			fmt.Fprintf(j.Out, format, args...)
		}
	}
	if ck.ResumeFile != "" {
		c, err := j.readCheckpoint(ck.ResumeFile, arch)
		if err != nil {
			return nil, "", fmt.Errorf("Checkpointing.ResumeFile %s: refused: %v", ck.ResumeFile, err)
		}
		return c, ck.ResumeFile, nil
	}
	// The ps servers' emergency parts of a step, joined where together
	// they hold the whole model (trainer/paramserver/lastword_ps.go).
	joined, problems := JoinParts(ck.Dir, arch.NumParams())
	if joined != "" {
		say("resume: joined the servers' emergency parts into %s\n", joined)
	}
	for _, p := range problems {
		say("resume: emergency part left alone: %s\n", p)
	}
	files, err := ckpt.List(ck.Dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, "", fmt.Errorf("Checkpointing.ResumeLatest: %w", err)
	}
	if err == nil {
		j.removeLeftovers()
	}
	if len(files) == 0 {
		say("resume: no checkpoint in %s: starting from the beginning\n", ck.Dir)
		return nil, "", nil
	}
	var refused []string
	for _, f := range files {
		c, err := j.readCheckpoint(f, arch)
		if err != nil {
			say("resume: refusing %s: %v\n", f, err)
			refused = append(refused, fmt.Sprintf("%s: %v", filepath.Base(f), err))
			continue
		}
		if len(refused) > 0 {
			say("resume: falling back to the previous valid checkpoint, %s\n", f)
		}
		return c, f, nil
	}
	return nil, "", fmt.Errorf("Checkpointing.ResumeLatest: no valid checkpoint in %s (%s)", ck.Dir, strings.Join(refused, "; "))
}

// loadResume reads the checkpoint on rank 0 and hands it to every rank:
// nil when the job starts fresh. params is the model's length.
func (j *Job) loadResume(arch model.Arch) (*Resumed, error) {
	if !j.Checkpoint.Resuming() {
		return nil, nil
	}
	c := j.Comm
	t0 := time.Now()
	var ck *checkpoint
	var path string
	var pickErr error
	head := make([]uint64, 7)
	var start Position
	if c.Rank() == 0 {
		ck, path, head, start, pickErr = j.resumeHead(arch)
	}
	if err := collectives.BroadcastUint64(c, head, 0); err != nil {
		return nil, fmt.Errorf("resuming: %w", err)
	}
	switch head[0] {
	case headRefused:
		if pickErr == nil {
			pickErr = errors.New("rank 0 refused the checkpoint (it says why)")
		}
		return nil, refusedError{pickErr}
	case headFresh:
		return nil, nil
	}
	r := &Resumed{Position: Position{Epoch: int(head[1]), Step: int(head[2]), Steps: int(head[3])}}
	var err error
	if r.Reshard, err = bcastSegments(c, int(head[6]), start.Reshard); err != nil {
		return nil, err
	}
	var params, opt, buffers []float32
	if ck != nil {
		params, opt, buffers = ck.Params, ck.Opt, ck.Buffers
	}
	if r.Params, err = bcastFloats(c, arch.NumParams(), params, "weights"); err != nil {
		return nil, err
	}
	if r.Opt, err = bcastFloats(c, int(head[4]), opt, "optimizer state"); err != nil {
		return nil, err
	}
	if r.Buffers, err = bcastFloats(c, int(head[5]), buffers, "batch-norm statistics"); err != nil {
		return nil, err
	}
	if err := UnitOf(j.Cfg.Sync).Resume(j, ck, r); err != nil {
		return nil, err
	}
	if c.Rank() == 0 && j.Out != nil {
		of := ""
		if len(r.Reshard) > 0 {
			of = " of the rest dealt to these ranks"
		}
		fmt.Fprintf(j.Out, "resume: from %s: epoch %d step %d%s (%d steps run), read and sent to every rank in %.0f ms\n",
			path, r.Epoch, r.Step, of, r.Steps, 1e3*time.Since(t0).Seconds())
	}
	return r, nil
}

// resumeHead is what rank 0 found (pickCheckpoint), as the head every rank
// receives: refused / none / a checkpoint (headRefused, headFresh,
// headFound), the position to start from (at another number of ranks, the
// rest of its epoch: reshard.go), its optimizer state's length, its
// batch-norm statistics' and its stretches'.
func (j *Job) resumeHead(arch model.Arch) (ck *checkpoint, path string, head []uint64, start Position, err error) {
	head = make([]uint64, 7)
	ck, path, err = j.pickCheckpoint(arch)
	switch {
	case err != nil:
		head[0] = headRefused
	case ck != nil:
		start = ck.Meta.Position
		if ck.Meta.Workers != j.Sched.Ranks {
			start = resharded(start, ck.Meta.Workers, j.batchOf(ck.Meta.Workers))
			if j.Out != nil && len(start.Reshard) > 0 {
				fmt.Fprintf(j.Out, "resume: %s was written by %d training ranks at step %d of epoch %d: the rest of the epoch goes to these %d\n",
					path, ck.Meta.Workers, ck.Meta.Step, ck.Meta.Epoch, j.Sched.Ranks)
			}
		}
		head = []uint64{headFound, uint64(start.Epoch), uint64(start.Step), uint64(start.Steps), uint64(len(ck.Opt)), uint64(len(ck.Buffers)), uint64(len(start.Reshard))}
	}
	return ck, path, head, start, err
}

// bcastSegments hands every rank rank 0's n segments segs (how a re-dealt
// epoch was begun; nil: none).
func bcastSegments(c collectives.Comm, n int, segs []Segment) ([]Segment, error) {
	if n == 0 {
		return nil, nil
	}
	v := make([]uint64, 3*n)
	for i, sg := range segs {
		v[3*i], v[3*i+1], v[3*i+2] = uint64(sg.Ranks), uint64(sg.Steps), uint64(sg.Batch)
	}
	if err := collectives.BroadcastUint64(c, v, 0); err != nil {
		return nil, fmt.Errorf("resuming: how the epoch was begun: %w", err)
	}
	out := make([]Segment, n)
	for i := range out {
		out[i] = Segment{Ranks: int(v[3*i]), Steps: int(v[3*i+1]), Batch: int(v[3*i+2])}
	}
	return out, nil
}

// bcastFloats hands every rank rank 0's n floats src (what names them in
// an error; n 0: nil, nothing sent).
func bcastFloats(c collectives.Comm, n int, src []float32, what string) ([]float32, error) {
	if n == 0 {
		return nil, nil
	}
	v := make([]float32, n)
	copy(v, src)
	if err := collectives.Broadcast(c, v, 0); err != nil {
		return nil, fmt.Errorf("resuming: %s: %w", what, err)
	}
	return v, nil
}

// refusedError is a checkpoint refused for resuming: ErrCheckpoint and
// ErrUsage.
type refusedError struct{ err error }

func (e refusedError) Error() string   { return e.err.Error() }
func (e refusedError) Unwrap() []error { return []error{e.err, ErrCheckpoint, ErrUsage} }

// The first word of loadResume's head.
const (
	headFresh   = iota // no checkpoint: start from the beginning
	headFound          // a checkpoint follows
	headRefused        // rank 0 refused what it was to resume from
)

// checkCheckpointing validates the checkpoint settings and that every rank
// has the same (the stop vote and the residue collection are collective).
func (t *Trainer) checkCheckpointing(cfg Config) error {
	ck := t.Checkpoint
	if ck != nil {
		switch {
		case ck.Every < 0 || ck.EveryEpochs < 0:
			return bad("Checkpoint", "every %d steps / %d epochs: must not be negative", ck.Every, ck.EveryEpochs)
		case ck.Keep < 0:
			return bad("Checkpoint", "keep %d must not be negative", ck.Keep)
		case ck.ResumeLatest && ck.Dir == "":
			return bad("Checkpoint", "resuming from the newest checkpoint needs a checkpoint folder")
		}
		if ck.Enabled() || ck.Resuming() {
			if err := UnitOf(cfg.Sync).CheckCheckpointing(cfg, ck); err != nil {
				return err
			}
		}
	}
	var mine string
	if ck != nil {
		mine = fmt.Sprintf("%v/%d/%d", ck.Enabled(), ck.Every, ck.EveryEpochs)
	}
	mine += fmt.Sprintf("/stop=%v", t.Stop != nil)
	h := fnv.New64a()
	h.Write([]byte(mine))
	if t.Comm.Size() == 1 {
		return nil
	}
	differ, _, err := collectives.Agree(t.Comm, h.Sum64())
	if err != nil {
		return fmt.Errorf("comparing checkpoint settings: %w", err)
	}
	if len(differ) > 0 {
		return fmt.Errorf("%s started with other checkpoint or signal settings than rank 0: start every rank with the same command line: %w", rankList(differ), ErrConfigMismatch)
	}
	return nil
}
