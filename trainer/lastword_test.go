package trainer

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/trainer/ckpt"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/engine"
	"github.com/dml-project/dml/trainer/model"
)

// lastWordRun trains cfg on n in-process ranks with an emergency-keeping
// checkpoint folder; when rank `stuck` loads the batch of step `at` (its
// (at+1)-th step) of epoch `epoch` it stops there until the test has called LastWord on
// rank `caller` (the others then wait in the AllReduce of that step, as
// survivors do for a dead rank). It returns what LastWord returned, a
// second call's error, and the checkpoint folder.
func lastWordRun(t *testing.T, n int, cfg Config, stuck, caller, epoch, at int) (path string, steps int, again error, dir string) {
	t.Helper()
	dir = t.TempDir()
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	engine.LoadHook = func(rank, e, step int, _ *data.Dense, _ []int, _ int) {
		if rank == stuck && e == epoch && step == at {
			once.Do(func() { close(reached) })
			<-release
		}
	}
	defer func() { engine.LoadHook = nil }()
	trs := make([]*Trainer, n)
	var ready sync.WaitGroup
	ready.Add(n)
	var err error
	go func() {
		<-reached
		ready.Wait()
		path, steps, err = trs[caller].LastWord(Emergency{DeadRank: stuck, FoundBy: caller})
		_, _, again = trs[caller].LastWord(Emergency{DeadRank: stuck, FoundBy: caller})
		close(release)
	}()
	_, errs := runTrainers(t, n, cfg, Checkpointing{Dir: dir, Emergency: true, Keep: 100}, func(c *local.Comm, tr *Trainer) {
		trs[c.Rank()] = tr
		ready.Done()
	})
	noErrs(t, errs)
	if err != nil {
		t.Fatalf("LastWord: %v", err)
	}
	return path, steps, again, dir
}

// TestLastWord: a survivor's emergency checkpoint, written while a peer
// is stuck before step k+1 (the survivor in that step's AllReduce, or the
// stuck rank itself), holds exactly the state of the boundary after step
// k (or, where the survivor had not yet ended step k, after step k-1: the
// weights, momentum and position a regular checkpoint there holds), with buckets overlapped with the backward pass; it is marked as
// an emergency one; a second call writes nothing; and resuming from it on
// as many ranks ends bit for bit as the run straight through.
func TestLastWord(t *testing.T) {
	cfg := synthCfg()
	cfg.Epochs, cfg.MaxSteps = 1, 9
	cfg.Overlap, cfg.BucketBytes = true, 64 // a bucket per layer
	const at = 6
	// A regular checkpoint at every step, the reference.
	refDir := t.TempDir()
	straight, errs := runCkpt(t, 2, cfg, Checkpointing{Dir: refDir, Every: 1, Keep: 100}, 0)
	noErrs(t, errs)
	for _, who := range []struct{ stuck, caller int }{{1, 0}, {0, 0}} {
		path, steps, again, dir := lastWordRun(t, 2, cfg, who.stuck, who.caller, 1, at)
		// The stuck rank has completed `at` steps; its peer too, or it
		// may still be finishing step `at` (its AllReduce's last piece, its
		// update): then its last word is step at-1's, as whole.
		if steps != at && (steps != at-1 || who.stuck == who.caller) || filepath.Base(path) != ckpt.Name(steps) || filepath.Dir(path) != dir {
			t.Fatalf("rank %d stuck, rank %d's last word: %s (%d steps), want %s in %s", who.stuck, who.caller, path, steps, ckpt.Name(at), dir)
		}
		want := readCheckpointFile(t, filepath.Join(refDir, ckpt.Name(steps)))
		got := readCheckpointFile(t, path)
		if !slices.Equal(got.Params, want.Params) || !slices.Equal(got.Opt, want.Opt) {
			t.Errorf("rank %d stuck: the emergency checkpoint's weights or momentum differ from the regular checkpoint of step %d", who.stuck, steps)
		}
		if got.Meta.Position.Steps != want.Meta.Position.Steps || got.Meta.Step != want.Meta.Step || got.Meta.Epoch != want.Meta.Epoch {
			t.Errorf("rank %d stuck: position %+v, the regular checkpoint's %+v", who.stuck, got.Meta.Position, want.Meta.Position)
		}
		if e := got.Meta.Emergency; e == nil || e.DeadRank != who.stuck || e.WrittenBy != who.caller || e.Time == "" {
			t.Errorf("rank %d stuck: emergency record %+v", who.stuck, e)
		}
		if !errors.Is(again, ErrNoLastWord) {
			t.Errorf("a second LastWord: %v, want ErrNoLastWord", again)
		}
		// Resumed on 2 ranks: the run straight through, bit for bit.
		res, errs := runCkpt(t, 2, cfg, Checkpointing{ResumeFile: path}, 0)
		noErrs(t, errs)
		if !slices.Equal(finalParams(t, res), finalParams(t, straight)) {
			t.Errorf("rank %d stuck: resumed from the emergency checkpoint, other weights than straight through", who.stuck)
		}
	}
}

// TestLastWordNothingToSay: no checkpoint folder, Emergency off, or one
// rank: LastWord writes nothing and says so.
func TestLastWordNothingToSay(t *testing.T) {
	cfg := synthCfg()
	cfg.Epochs, cfg.MaxSteps = 1, 2
	for _, c := range []struct {
		n  int
		ck Checkpointing
	}{{2, Checkpointing{}}, {2, Checkpointing{Dir: t.TempDir()}}, {1, Checkpointing{Dir: t.TempDir(), Emergency: true}}} {
		var trs []*Trainer
		var mu sync.Mutex
		_, errs := runTrainers(t, c.n, cfg, c.ck, func(_ *local.Comm, tr *Trainer) {
			mu.Lock()
			trs = append(trs, tr)
			mu.Unlock()
		})
		noErrs(t, errs)
		if _, _, err := trs[0].LastWord(Emergency{}); !errors.Is(err, ErrNoLastWord) {
			t.Errorf("%d rank(s), %+v: LastWord: %v, want ErrNoLastWord", c.n, c.ck, err)
		}
	}
}

// TestServerLastWord: under --sync ps with 2 servers, a server's
// emergency checkpoint written while a worker is stuck before step k+1
// (the other worker waiting on the round) holds both key ranges (its own
// and its replica of the other's) exactly as the regular checkpoint of
// step k (or k-1, when the replica of round k was still on its way), in
// the next epoch; the workers have nothing to say; and resuming from it
// on as many ranks ends bit for bit as the run straight through.
func TestServerLastWord(t *testing.T) {
	cfg := synthCfg()
	cfg.Sync, cfg.PS.Servers = SyncPS, 2
	cfg.Epochs, cfg.MaxSteps = 2, 20 // 13 steps an epoch on 2 workers
	const at = 16                    // step 3 of epoch 2
	refDir := t.TempDir()
	straight, errs := runCkpt(t, 4, cfg, Checkpointing{Dir: refDir, Every: 1, Keep: 100}, 0)
	noErrs(t, errs)
	for _, caller := range []int{0, 1} {
		path, steps, _, _ := lastWordRun(t, 4, cfg, 2, caller, 2, at-13)
		if steps != at && steps != at-1 {
			t.Fatalf("server %d's last word: %s (%d steps), want step %d (or %d)", caller, path, steps, at, at-1)
		}
		want := readCheckpointFile(t, filepath.Join(refDir, ckpt.Name(steps)))
		got := readCheckpointFile(t, path)
		if !slices.Equal(got.Params, want.Params) || !slices.Equal(got.Opt, want.Opt) {
			t.Errorf("server %d: the emergency checkpoint's weights or momentum differ from the regular checkpoint of step %d", caller, steps)
		}
		if got.Meta.Position.Steps != want.Meta.Position.Steps || got.Meta.Step != want.Meta.Step || got.Meta.Epoch != want.Meta.Epoch {
			t.Errorf("server %d: position %+v, the regular checkpoint's %+v", caller, got.Meta.Position, want.Meta.Position)
		}
		if e := got.Meta.Emergency; e == nil || e.WrittenBy != caller {
			t.Errorf("server %d: emergency record %+v", caller, e)
		}
		res, errs := runCkpt(t, 4, cfg, Checkpointing{ResumeFile: path}, 0)
		noErrs(t, errs)
		if !slices.Equal(finalParams(t, res), finalParams(t, straight)) {
			t.Errorf("server %d: resumed from the emergency checkpoint, other weights than straight through", caller)
		}
	}
	// A worker has nothing to write. (Without replication, PSConfig's -1,
	// the job runs as well.)
	for _, c := range []struct {
		servers, ranks, caller, replicate int
	}{{2, 4, 3, 0}, {2, 4, 2, -1}} {
		cfg := cfg
		cfg.PS.Servers, cfg.PS.ReplicateEvery = c.servers, c.replicate
		dir := t.TempDir()
		var tr *Trainer
		_, errs := runTrainers(t, c.ranks, cfg, Checkpointing{Dir: dir, Emergency: true, Keep: 100}, func(cm *local.Comm, t *Trainer) {
			if cm.Rank() == c.caller {
				tr = t
			}
		})
		noErrs(t, errs)
		if _, _, err := tr.LastWord(Emergency{}); !errors.Is(err, ErrNoLastWord) {
			t.Errorf("%d servers, rank %d: LastWord: %v, want ErrNoLastWord", c.servers, c.caller, err)
		}
	}
}

// TestServerPartsJoined: with 3 servers each holds two ranges; the
// survivors' last words are parts, which a resume from the folder joins
// into the checkpoint of their common step (every server when a worker
// died; servers 0 and 2 when server 1 did: server 0 holds its replica),
// and the run goes on bit for bit as straight through. One server's
// parts alone hold too little: nothing is joined, the resume falls back.
func TestServerPartsJoined(t *testing.T) {
	cfg := synthCfg()
	cfg.Sync, cfg.PS.Servers = SyncPS, 3
	cfg.Epochs, cfg.MaxSteps = 2, 12 // 13 steps an epoch on 2 workers
	straight, errs := runCkpt(t, 5, cfg, Checkpointing{Dir: t.TempDir(), Every: 1, Keep: 100}, 0)
	noErrs(t, errs)
	for _, callers := range [][]int{{0, 1, 2}, {0, 2}, {1}} {
		dir := t.TempDir()
		reached, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		engine.LoadHook = func(rank, e, step int, _ *data.Dense, _ []int, _ int) {
			if rank == 3 && e == 1 && step == 7 {
				once.Do(func() { close(reached) })
				<-release
			}
		}
		trs := make([]*Trainer, 5)
		var ready sync.WaitGroup
		ready.Add(5)
		var said []error
		go func() {
			<-reached
			ready.Wait()
			for _, c := range callers {
				_, _, err := trs[c].LastWord(Emergency{DeadRank: 3, FoundBy: c})
				said = append(said, err)
			}
			close(release)
		}()
		_, errs := runTrainers(t, 5, cfg, Checkpointing{Dir: dir, Emergency: true, Keep: 100}, func(c *local.Comm, tr *Trainer) {
			trs[c.Rank()] = tr
			ready.Done()
		})
		engine.LoadHook = nil
		noErrs(t, errs)
		for i, err := range said {
			if err != nil {
				t.Fatalf("callers %v: server %d's last word: %v", callers, callers[i], err)
			}
		}
		// The run ended with checkpoints of its own: keep only the parts.
		files, _ := filepath.Glob(filepath.Join(dir, "ckpt-s*.npz"))
		parts := 0
		for _, f := range files {
			if _, _, ok := engine.PartOf(filepath.Base(f)); ok {
				parts++
			} else {
				os.Remove(f)
			}
		}
		if parts == 0 {
			t.Fatalf("callers %v: no part written (%v)", callers, files)
		}
		res, errs := runCkpt(t, 5, cfg, Checkpointing{Dir: dir, ResumeLatest: true, Keep: 100}, 0)
		joined, _ := filepath.Glob(filepath.Join(dir, "ckpt-s*.npz"))
		var emergency *ckpt.File // the joined one, among the run's own
		for _, f := range joined {
			if _, _, ok := engine.PartOf(filepath.Base(f)); ok {
				t.Errorf("callers %v: part %s left after the resume", callers, f)
			} else if c := readCheckpointFile(t, f); c.Meta.Emergency != nil {
				emergency = c
			}
		}
		if len(callers) == 1 { // two ranges of three: not joined (and removed)
			noErrs(t, errs)
			if emergency != nil {
				t.Errorf("one server's parts were joined: %+v", emergency.Meta.Emergency)
			}
			continue
		}
		noErrs(t, errs)
		if !slices.Equal(finalParams(t, res), finalParams(t, straight)) {
			t.Errorf("callers %v: resumed from the joined parts, other weights than straight through (%v)", callers, joined)
		}
		if emergency == nil || len(emergency.Meta.Emergency.MergedFrom) != len(callers) || emergency.Meta.Steps < 6 {
			t.Errorf("callers %v: the joined checkpoint %v", callers, emergency != nil)
		}
	}
}

// testPart writes rank's part of step `steps` holding ranges, every held
// weight val, from a job of ranks ranks, written at time `at`.
func testPart(t *testing.T, dir string, arch model.Arch, steps, rank, ranks int, at string, val float32, ranges ...[2]int) {
	t.Helper()
	p := arch.NumParams()
	c := &ckpt.File{Meta: ckpt.Meta{Format: ckpt.Format, Version: ckpt.Version, Arch: arch, Ranks: ranks, Servers: 3, Workers: ranks - 3,
		Position: Position{Epoch: 1, Step: steps, Steps: steps}}, State: model.State{Params: make([]float32, p)}}
	c.Meta.Emergency = &Emergency{DeadRank: 1, WrittenBy: rank, Part: true, Held: ranges, Time: at}
	for _, r := range ranges {
		for k := r[0]; k < r[1]; k++ {
			c.Params[k] = val
		}
	}
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, engine.PartName(steps, rank)), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestJoinPartsHygiene: parts of two attempts (another job size) that
// together cover the model are not joined into one; parts that disagree
// where they overlap are not either; parts of a step that has a whole
// checkpoint are removed; every part is gone after a join (a reviewer's
// finds: a leftover part was joined with a later attempt's).
func TestJoinPartsHygiene(t *testing.T) {
	arch, _ := model.NewArch(3, []int{2}, 2, model.SoftmaxCE)
	p := arch.NumParams()
	r0, r1, r2 := [2]int{0, 5}, [2]int{5, 10}, [2]int{10, p}
	parts := func(dir string) int { m, _ := filepath.Glob(filepath.Join(dir, "*.part-r*.npz")); return len(m) }

	dir := t.TempDir()
	testPart(t, dir, arch, 101, 1, 6, "2026-01-01T00:00:01Z", 1, r1, r2)
	testPart(t, dir, arch, 101, 0, 5, "2026-01-01T00:00:09Z", 2, r0, r1)
	if w, probs := engine.JoinParts(dir, p); w != "" || !strings.Contains(strings.Join(probs, ";"), "another job or death") {
		t.Errorf("two attempts' parts: joined %q (%v)", w, probs)
	}
	if n := parts(dir); n != 0 {
		t.Errorf("%d parts left after joinParts", n)
	}

	dir = t.TempDir()
	testPart(t, dir, arch, 7, 0, 5, "2026-01-01T00:00:01Z", 1, r0, r1)
	testPart(t, dir, arch, 7, 2, 5, "2026-01-01T00:00:01Z", 3, r1, r2) // r1 differs
	if w, probs := engine.JoinParts(dir, p); w != "" || !strings.Contains(strings.Join(probs, ";"), "disagree") {
		t.Errorf("clashing parts: joined %q (%v)", w, probs)
	}

	dir = t.TempDir()
	testPart(t, dir, arch, 7, 0, 5, "2026-01-01T00:00:01Z", 1, r0, r1)
	os.WriteFile(filepath.Join(dir, ckpt.Name(7)), []byte("x"), 0o644)
	engine.JoinParts(dir, p)
	if n := parts(dir); n != 0 {
		t.Errorf("a part of a step with a checkpoint is left")
	}

	dir = t.TempDir()
	testPart(t, dir, arch, 9, 0, 5, "2026-01-01T00:00:01Z", 1, r0, r1)
	testPart(t, dir, arch, 9, 2, 5, "2026-01-01T00:00:02Z", 1, r1, r2)
	testPart(t, dir, arch, 8, 2, 5, "2026-01-01T00:00:02Z", 1, r2) // an older round's, alone
	w, probs := engine.JoinParts(dir, p)
	if w != filepath.Join(dir, ckpt.Name(9)) || parts(dir) != 0 {
		t.Errorf("joined %q (%v), %d parts left", w, probs, parts(dir))
	}
}
