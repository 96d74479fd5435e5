package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer/ckpt"
	"github.com/dml-project/dml/trainer/model"
)

// The survivors' last word (issue 20): when the liveness ring finds a rank
// dead, the job is lost (MPI is fail-stop) and the step in flight with it,
// but every rank that holds the whole training state can still write it,
// without any collective, before the launcher ends it. Under --sync
// allreduce every rank holds it. Trainer.LastWord writes it as an
// ordinary checkpoint of the last step this rank completed, marked as an
// emergency one in its metadata, which --resume takes like any other.
//
// What it writes must be one step's state, not a mix: the rank's main
// goroutine may be anywhere in a step when a peer dies (blocked in the
// AllReduce, or in the stop vote). Where the weights and optimizer state
// are host memory (the CPU backends) nothing is copied: the step loop
// marks three fences, and LastWord holds the loop at the next one while it
// reads the state in place.
//   - stepBegins (before the step's batch): the state is that of the last
//     boundary; the batch-norm statistics, which the forward pass changes,
//     are copied here (a few floats per channel).
//   - beginUpdate / endUpdate around the weights' update, which holds no
//     communication (the AllReduce strategy then updates its buckets after
//     the last one's sum has arrived, not one by one as they arrive, so
//     that a survivor stuck in a later bucket has updated none): LastWord
//     waits for an update under way to end, and then writes the step it
//     completed, with the statistics as they are.
// On a device backend (whose ops are not for a second goroutine) the
// weights and optimizer state are downloaded at every step boundary
// instead, into one of two copies, which LastWord writes.
//
// Departures from a regular checkpoint, said in the metadata's emergency
// record: the batch-norm running statistics are this rank's own (the
// regular checkpoint averages them over the ranks, which takes a
// collective); not said there: --error-feedback's residues are left out
// (they are every rank's own; a resume starts them at zero); and every
// survivor writes one (to the same file name when
// the folder is shared: the same weights, written atomically, so either
// copy is whole).

// Emergency marks an emergency checkpoint (ckpt.Emergency).
type Emergency = ckpt.Emergency

// lastWord keeps what LastWord needs (see above).
type lastWord struct {
	j    *Job
	arch model.Arch
	// The live buffers: weights, optimizer state (nil: none) and the
	// model's own state (nil: none).
	params, opt, state kernels.Buffer
	// live: the weights and optimizer state are host memory, read in
	// place; else copied at every boundary (cur, spare).
	live bool

	mu    sync.Mutex
	moved *sync.Cond // signalled when an update ends or LastWord is done
	phase int        // where the step loop is: phaseSteady, phaseStep, phaseUpdate
	// writing: LastWord is reading the state, the loop waits at its next
	// fence; said: LastWord has run.
	writing, said bool
	// pos is the position of the weights in place (live), next the one
	// the step under way reaches; stats the batch-norm statistics at pos
	// (copied at stepBegins).
	pos, next Position
	stats     []float32
	ran       bool // a step has completed in this run
	torn      bool // an update failed half-way: nothing to write
	// cur and spare are the boundary copies of a device backend.
	cur, spare *snapshot
}

// Where the step loop is, for lastWord.
const (
	phaseSteady = iota // between an update's end and the next step: the state in place is pos's, statistics too
	phaseStep          // a step computes: the weights are pos's, the statistics change (stats holds pos's)
	phaseUpdate        // the weights change
)

// snapshot is a boundary's copy of a device backend's state.
type snapshot struct {
	model.State
	pos Position
}

// EmergencyWriter writes a rank's last word where the rank keeps no
// lastWord: a ps server's (trainer/paramserver/lastword_ps.go).
type EmergencyWriter interface {
	Write(e Emergency) (string, int, error)
}

// KeepEmergencyWriter makes w this rank's last word.
func (j *Job) KeepEmergencyWriter(w EmergencyWriter) { j.Trainer.serverWord.Store(&w) }

// KeepsLastWord: the job writes emergency checkpoints.
func (j *Job) KeepsLastWord() bool {
	return j.Checkpoint.Enabled() && j.Checkpoint.Emergency && j.Comm.Size() > 1
}

// KeepLastWord makes this rank keep what Trainer.LastWord needs, when the
// job writes checkpoints and asks for it. params, opt and state are the
// live buffers (opt and state may be nil); start is where training starts.
func (j *Job) KeepLastWord(arch model.Arch, params, opt, state kernels.Buffer, start Position) {
	if !j.KeepsLastWord() {
		return
	}
	w := &lastWord{j: j, arch: arch, params: params, opt: opt, state: state, pos: start}
	w.moved = sync.NewCond(&w.mu)
	_, hp := params.(kernels.HostBuffer)
	_, ho := opt.(kernels.HostBuffer)
	_, hs := state.(kernels.HostBuffer)
	w.live = hp && (opt == nil || ho) && (state == nil || hs)
	if w.live {
		if state != nil {
			w.stats = make([]float32, state.Len())
		}
	} else {
		w.cur, w.spare = &snapshot{}, &snapshot{}
	}
	j.LW = w
	j.Trainer.lastWord.Store(w)
}

// fence waits while LastWord reads the state (w.mu held).
func (w *lastWord) fence() {
	for w.writing {
		w.moved.Wait()
	}
}

// stepBegins: a step towards next begins (before its batch is loaded).
func (w *lastWord) stepBegins(next Position) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fence()
	if w.live && w.state != nil {
		copy(w.stats, w.state.(kernels.HostBuffer).Data())
	}
	w.phase, w.next = phaseStep, next
}

// BeginUpdate: the weights are about to change.
func (w *lastWord) BeginUpdate() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fence()
	w.phase = phaseUpdate
}

// EndUpdate: the update of the step under way has ended (err: it
// failed half-way, and the weights are no step's any more).
func (w *lastWord) EndUpdate(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.phase, w.pos = phaseSteady, w.next
	if w.live {
		w.ran = true // a device backend's copy is whole at its boundary
	}
	if err != nil {
		w.torn = true
	}
	w.moved.Broadcast()
}

// changeState runs f, which changes the model's own state in place
// (syncState's averaged batch-norm statistics) between steps, inside a
// fence: LastWord does not read the statistics half-written.
func (w *lastWord) changeState(f func() error) error {
	w.mu.Lock()
	w.fence()
	was := w.phase
	w.phase = phaseUpdate
	w.mu.Unlock()
	err := f()
	w.mu.Lock()
	w.phase = was
	w.moved.Broadcast()
	w.mu.Unlock()
	return err
}

// boundary copies a device backend's state at the step boundary before
// next into the spare copy, which then becomes the current one.
func (w *lastWord) boundary(next Position) error {
	if w.live {
		return nil
	}
	w.mu.Lock()
	sp, said := w.spare, w.said
	w.mu.Unlock()
	if said {
		return nil
	}
	sp.pos = next
	if err := sp.Capture(w.j.Backend, w.params, w.opt, w.state); err != nil {
		return fmt.Errorf("emergency copy: %w", err)
	}
	w.mu.Lock()
	if !w.said {
		w.cur, w.spare = sp, w.cur
		w.ran = true
	}
	w.mu.Unlock()
	return nil
}

// hostData is a host buffer's floats (nil for nil).
func hostData(b kernels.Buffer) []float32 {
	if b == nil {
		return nil
	}
	return b.(kernels.HostBuffer).Data()
}

// ErrNoLastWord is LastWord's error when it has nothing to write.
var ErrNoLastWord = errors.New("no emergency checkpoint")

// LastWord writes the state of the last step this rank completed as an
// emergency checkpoint into the checkpoint folder, marked with e, and
// returns its path and the steps it holds. It is meant for the moment a
// peer is found dead: any goroutine may call it while Run is blocked; it
// takes no collective, and waits only for an update under way to end
// (the step loop stays at its next fence while it writes). It writes
// nothing, returning an error wrapping ErrNoLastWord, when the job keeps
// no such state (no checkpoint folder, Checkpointing.Emergency off, a
// world of one rank, or a strategy whose ranks do not each hold the whole
// state), before the first step of this run has ended, or when it has
// run already. A checkpoint of the same step already in the folder (the
// regular one of that boundary) is kept and its path returned.
func (t *Trainer) LastWord(e Emergency) (string, int, error) {
	w := t.lastWord.Load()
	if w == nil {
		if s := t.serverWord.Load(); s != nil { // trainer/paramserver/lastword_ps.go
			return (*s).Write(e)
		}
		return "", 0, fmt.Errorf("%w: this rank keeps no copy of the training state (it needs --checkpoint-dir, --sync allreduce without --local-steps or a ps server, and more than one rank)", ErrNoLastWord)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.said {
		return "", 0, fmt.Errorf("%w: written already", ErrNoLastWord)
	}
	w.said, w.writing = true, true
	defer func() {
		w.writing = false
		w.moved.Broadcast()
	}()
	for w.phase == phaseUpdate { // an update holds no communication: it ends
		w.moved.Wait()
	}
	switch {
	case w.torn:
		return "", 0, fmt.Errorf("%w: an update of the weights failed half-way", ErrNoLastWord)
	case !w.ran:
		return "", 0, fmt.Errorf("%w: no step has ended yet", ErrNoLastWord)
	}
	var c *checkpoint
	var pos Position
	if w.live {
		pos = w.pos
		c = &checkpoint{State: model.State{Params: hostData(w.params), Opt: hostData(w.opt), Buffers: hostData(w.state)}}
		if w.phase == phaseStep && w.state != nil {
			c.Buffers = w.stats
		}
	} else {
		pos = w.cur.pos
		c = &checkpoint{State: w.cur.State}
	}
	j := w.j
	path := filepath.Join(j.Checkpoint.Dir, ckpt.Name(pos.Steps))
	if _, err := os.Stat(path); err == nil {
		return path, pos.Steps, nil
	}
	e.WrittenBy = j.Comm.Rank()
	e.OwnStatistics = w.state != nil
	e.Time = time.Now().UTC().Format(time.RFC3339Nano)
	return j.WriteEmergency(path, c, w.arch, pos, e)
}

// WriteEmergency writes c, at pos and marked with e, to path.
func (j *Job) WriteEmergency(path string, c *checkpoint, arch model.Arch, pos Position, e Emergency) (string, int, error) {
	c.Meta = j.checkpointMeta(checkpointMeta{Arch: arch}, pos)
	c.Meta.Emergency = &e
	b, err := c.Encode()
	if err != nil {
		return "", 0, fmt.Errorf("emergency checkpoint: %w", err)
	}
	if err := ckpt.WriteAtomic(path, b); err != nil {
		return "", 0, fmt.Errorf("emergency checkpoint: writing %s: %w", path, err)
	}
	return path, pos.Steps, nil
}
