package trainer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/ckpt"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/decentral"
	"github.com/dml-project/dml/trainer/engine"
	"github.com/dml-project/dml/trainer/gossip"
	"github.com/dml-project/dml/trainer/internal/numtest"
)

// rowsLog records what the strategies load (loadHook): the training
// set's rows of each epoch (found by their contents), and for each step
// the rows all ranks loaded and the global batch they scaled by.
type rowsLog struct {
	mu     sync.Mutex
	ids    map[string]int
	rows   map[int][]int
	loaded map[[2]int]int
	gb     map[[2]int]int
	bad    []string
}

// rowKey is row x's bits.
func rowKey(x []float32) string {
	b := make([]byte, 0, 4*len(x))
	for _, v := range x {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return string(b)
}

// logRows sets loadHook to record into a rowsLog, for cfg's training set
// (whose rows must differ).
func logRows(t *testing.T, cfg Config) *rowsLog {
	t.Helper()
	src, _, err := cfg.Data.Open(cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	n, _, _ := src.Shape()
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	full, err := src.Subset(all)
	if err != nil {
		t.Fatal(err)
	}
	l := &rowsLog{ids: map[string]int{}, rows: map[int][]int{}, loaded: map[[2]int]int{}, gb: map[[2]int]int{}}
	c := full.Cols
	for i := range n {
		k := rowKey(full.X[i*c : (i+1)*c])
		if _, dup := l.ids[k]; dup {
			t.Fatalf("rows %d and %d of the training set are alike", l.ids[k], i)
		}
		l.ids[k] = i
	}
	engine.LoadHook = func(rank, epoch, step int, set *data.Dense, idx []int, gb int) {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, i := range idx {
			row, ok := l.ids[rowKey(set.X[i*set.Cols:(i+1)*set.Cols])]
			if !ok {
				l.bad = append(l.bad, fmt.Sprintf("rank %d loaded a row not in the training set", rank))
			}
			l.rows[epoch] = append(l.rows[epoch], row)
		}
		k := [2]int{epoch, step}
		l.loaded[k] += len(idx)
		if gb < 0 {
			return
		}
		if old, ok := l.gb[k]; ok && old != gb {
			l.bad = append(l.bad, fmt.Sprintf("epoch %d step %d: ranks scaled by global batches %d and %d", epoch, step, old, gb))
		}
		l.gb[k] = gb
	}
	t.Cleanup(func() { engine.LoadHook = nil })
	return l
}

// ran ends a run: every step's global batch was the rows the ranks
// loaded; the steps' records are cleared (the next run numbers its steps
// anew), the rows kept.
func (l *rowsLog) ran(t *testing.T) {
	t.Helper()
	for _, b := range l.bad {
		t.Error(b)
	}
	for k, gb := range l.gb {
		if l.loaded[k] != gb {
			t.Errorf("epoch %d step %d: the ranks loaded %d rows and scaled by a global batch of %d", k[0], k[1], l.loaded[k], gb)
		}
	}
	l.bad = nil
	clear(l.loaded)
	clear(l.gb)
}

// reset forgets what was recorded.
func (l *rowsLog) reset() {
	clear(l.rows)
	clear(l.loaded)
	clear(l.gb)
}

// onceEach checks that every row epoch trained was trained once and that
// they are the rows 0 … n−1, and returns n.
func (l *rowsLog) onceEach(t *testing.T, epoch int) int {
	t.Helper()
	l.ran(t)
	counts := map[int]int{}
	n := 0
	for _, row := range l.rows[epoch] {
		counts[row]++
		n = max(n, row+1)
	}
	for row, c := range counts {
		if c != 1 {
			t.Errorf("row %d trained %d times in epoch %d", row, c, epoch)
		}
	}
	if len(counts) != n {
		t.Errorf("epoch %d trained %d distinct rows of %d", epoch, len(counts), n)
	}
	return n
}

// TestResumeOtherRanks: a 2-rank allreduce checkpoint in the middle of an
// epoch resumes on 3 ranks, whose checkpoint in the middle of the rest
// resumes on 4: over the three runs every training sample of that epoch is
// trained exactly once, and the next epoch is the 4 ranks' own. A
// checkpoint inside the re-dealt rest resumes at its own size bit for bit,
// and the runs say what they do.
func TestResumeOtherRanks(t *testing.T) {
	cfg := synthCfg()
	cfg.Shuffle, cfg.Epochs = true, 2
	log := logRows(t, cfg)
	ckA := checkpointAt(t, 2, cfg, 5, "") // of 13 steps per epoch on 2 ranks
	log.ran(t)
	dirB := t.TempDir()

	// 3 ranks, 2 steps into the rest, then 4 ranks to the end.
	b := cfg
	b.MaxSteps = 7
	var out strings.Builder
	_, errs := runOut(t, 3, b, Checkpointing{Dir: dirB, Every: 100, ResumeFile: ckA}, &out)
	noErrs(t, errs)
	log.ran(t)
	if s := out.String(); !strings.Contains(s, "written by 2 training ranks at step 5 of epoch 1: the rest of the epoch goes to these 3") {
		t.Errorf("the 3-rank run does not say it re-deals the epoch:\n%s", s)
	}
	filesB, _ := ckpt.List(dirB)
	if len(filesB) != 1 || filepath.Base(filesB[0]) != ckpt.Name(7) {
		t.Fatalf("checkpoints %v, want one at step 7", filesB)
	}
	res, errs := runCkpt(t, 4, cfg, Checkpointing{ResumeFile: filesB[0]}, 0)
	noErrs(t, errs)
	log.ran(t)
	n := res[0].Epochs[0].Steps
	nTrain := log.onceEach(t, 1)
	if len(log.rows[2]) != nTrain {
		t.Errorf("epoch 2 trained %d rows, want %d", len(log.rows[2]), nTrain)
	}
	// 4 ranks × batch 8: the standard epoch has ⌈nTrain/32⌉ steps.
	if want := (nTrain + 31) / 32; res[0].Epochs[1].Steps != want {
		t.Errorf("epoch 2 on 4 ranks ran %d steps, want %d", res[0].Epochs[1].Steps, want)
	}
	t.Logf("%d rows; epoch 1 on 4 ranks: %d steps; %d steps in all", nTrain, n, res[0].Steps)

	// The 3-rank checkpoint inside the rest, resumed on 3 ranks, ends as
	// the 3 ranks do straight on from the 2-rank checkpoint.
	straight, errs := runCkpt(t, 3, cfg, Checkpointing{ResumeFile: ckA}, 0)
	noErrs(t, errs)
	log.ran(t)
	again, errs := runCkpt(t, 3, cfg, Checkpointing{ResumeFile: filesB[0]}, 0)
	noErrs(t, errs)
	log.ran(t)
	if !slices.Equal(finalParams(t, again), finalParams(t, straight)) {
		t.Error("resumed inside the re-dealt rest at its own size: other weights than straight through")
	}
	if again[0].Steps != straight[0].Steps {
		t.Errorf("%d steps resumed, %d straight", again[0].Steps, straight[0].Steps)
	}
}

// TestResumeOtherRanksPS: a ps checkpoint (bsp, 1 server, 2 workers) in
// the middle of an epoch resumes on 2 servers and the same workers bit
// for bit as straight through (the key ranges laid anew from the whole
// vectors), and on 3 workers with the rest of the epoch dealt to them,
// every sample of it trained once. Under ssp it is refused.
func TestResumeOtherRanksPS(t *testing.T) {
	cfg := synthCfg()
	cfg.Shuffle, cfg.Epochs = true, 2
	cfg.Sync, cfg.PS.Servers = SyncPS, 1
	log := logRows(t, cfg)
	ck := checkpointAt(t, 3, cfg, 5, "")
	log.ran(t)
	straight := finalParams(t, mustRun(t, 3, cfg)[1:])
	log.ran(t)

	two := cfg
	two.PS.Servers = 2
	res, errs := runCkpt(t, 4, two, Checkpointing{ResumeFile: ck}, 0)
	noErrs(t, errs)
	log.ran(t)
	if !slices.Equal(finalParams(t, res[2:]), straight) {
		t.Error("resumed on 2 servers: other weights than 1 server straight through")
	}

	log.reset()
	checkpointAt(t, 3, cfg, 5, "") // its rows, logged again
	log.ran(t)
	res, errs = runCkpt(t, 4, cfg, Checkpointing{ResumeFile: ck}, 0)
	noErrs(t, errs)
	log.ran(t)
	if log.onceEach(t, 1) != len(log.rows[2]) {
		t.Errorf("epoch 1 trained %d rows over the two runs, epoch 2 %d", len(log.rows[1]), len(log.rows[2]))
	}
	if res[1].Steps <= 5 {
		t.Errorf("the resumed run counts %d steps", res[1].Steps)
	}

	ssp := cfg
	ssp.PS.Consistency, ssp.PS.Staleness = ps.SSP, 2
	ckSSP := checkpointAt(t, 3, ssp, 5, "")
	log.ran(t)
	_, errs = runCkpt(t, 4, ssp, Checkpointing{ResumeFile: ckSSP}, 0)
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "ps under bsp") {
		t.Errorf("ssp at another size: %v", errs[0])
	}
}

// TestResumeOtherRanksDPSGD: a 3-rank D-PSGD checkpoint in the middle of
// an epoch resumes on 4 ranks from the consensus model (the checkpoint's
// weights: a resume that runs no step ends with them), the rest of the
// epoch dealt to the 4, every sample of it trained once.
func TestResumeOtherRanksDPSGD(t *testing.T) {
	cfg := synthCfg()
	cfg.Shuffle, cfg.Epochs = true, 2
	cfg.Sync, cfg.Topology = SyncDPSGD, gossip.Ring
	log := logRows(t, cfg)
	path := checkpointAt(t, 3, cfg, 5, "")
	log.ran(t)
	ck := readCheckpointFile(t, path)
	none := cfg
	none.MaxSteps = 5
	res, errs := runCkpt(t, 4, none, Checkpointing{ResumeFile: path}, 0)
	noErrs(t, errs)
	log.ran(t)
	if !slices.Equal(finalParams(t, res), ck.Params) {
		t.Error("resumed on 4 ranks without a step: other weights than the checkpoint's consensus model")
	}
	res, errs = runCkpt(t, 4, cfg, Checkpointing{ResumeFile: path}, 0)
	noErrs(t, errs)
	log.ran(t)
	if log.onceEach(t, 1) != len(log.rows[2]) || res[0].Steps <= 5 {
		t.Errorf("epoch 1 trained %d rows over the two runs, epoch 2 %d; %d steps", len(log.rows[1]), len(log.rows[2]), res[0].Steps)
	}
	// Rank states of different lengths: refused, not a panic.
	ck.RankStates[0] = append(ck.RankStates[0], 1, 2, 3)
	_, errs = runCkpt(t, 2, cfg, Checkpointing{ResumeFile: writeCheckpointFile(t, ck)}, 0)
	if !errors.Is(errs[0], ErrCheckpoint) || !strings.Contains(errs[0].Error(), "rank 1's state has") {
		t.Errorf("rank states of different lengths: %v, want a refusal", errs[0])
	}
}

// TestResumeOtherRanksRefusesBadRecords: a checkpoint whose record of a
// re-dealt epoch could not have been written (an overflowing stretch, too
// many stretches, a stretch of more ranks than samples), or whose dpsgd
// rank states differ in length, is refused in one line, without a panic;
// a checkpoint inside a re-dealt epoch is version 2 (which binaries from
// before refuse), and one elsewhere stays version 1.
func TestResumeOtherRanksRefusesBadRecords(t *testing.T) {
	cfg := synthCfg()
	cfg.Shuffle = true
	ckA := checkpointAt(t, 2, cfg, 5, "")
	ckB := checkpointAt(t, 3, cfg, 7, ckA)
	if v := readCheckpointFile(t, ckA).Meta.Version; v != ckpt.Version {
		t.Errorf("a checkpoint in the standard order is version %d", v)
	}
	ck := readCheckpointFile(t, ckB)
	if ck.Meta.Version != ckpt.ReshardVersion || len(ck.Meta.Reshard) != 1 {
		t.Fatalf("the checkpoint inside the re-dealt epoch: version %d, %+v", ck.Meta.Version, ck.Meta.Reshard)
	}
	for _, tc := range []struct {
		name, want string
		edit       func(*ckpt.File)
	}{
		{"overflow", "does not fit", func(c *ckpt.File) { c.Meta.Reshard[0].Steps, c.Meta.Reshard[0].Batch = 1<<62+1, 2 }},
		{"ranks", "does not fit", func(c *ckpt.File) { c.Meta.Reshard[0].Ranks = 1 << 40 }},
		{"many", "sizes", func(c *ckpt.File) {
			for len(c.Meta.Reshard) <= engine.MaxSegments {
				c.Meta.Reshard = append(c.Meta.Reshard, c.Meta.Reshard[0])
			}
		}},
		{"workers", "training ranks for", func(c *ckpt.File) { c.Meta.Workers = 1 << 40 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := readCheckpointFile(t, ckB)
			tc.edit(c)
			_, errs := runCkpt(t, 4, cfg, Checkpointing{ResumeFile: writeCheckpointFile(t, c)}, 0)
			if !errors.Is(errs[0], ErrCheckpoint) || !strings.Contains(errs[0].Error(), tc.want) {
				t.Errorf("resumed from it: %v, want a refusal saying %q", errs[0], tc.want)
			}
		})
	}
}

// TestResumeOtherRanksCappedBatch: on a data set so small that --batch is
// capped at the largest shard, which depends on the ranks (80 on 2 ranks of
// 203 samples, 68 on 3), a checkpoint resumes on another number of ranks
// all the same, the stretch run at the first cap, every sample once.
func TestResumeOtherRanksCappedBatch(t *testing.T) {
	cfg := synthCfg()
	cfg.Shuffle, cfg.Batch, cfg.Epochs = true, 80, 2
	log := logRows(t, cfg)
	ck := checkpointAt(t, 2, cfg, 1, "")
	log.ran(t)
	_, errs := runCkpt(t, 3, cfg, Checkpointing{ResumeFile: ck}, 0)
	noErrs(t, errs)
	if n := log.onceEach(t, 1); n != len(log.rows[2]) {
		t.Errorf("epoch 1: %d rows, epoch 2: %d", n, len(log.rows[2]))
	}
}

// checkpointAt trains cfg on n ranks (from the checkpoint resume, when not
// "") until steps steps have run in all, and returns the path of the one
// checkpoint it writes there.
func checkpointAt(t *testing.T, n int, cfg Config, steps int, resume string) string {
	t.Helper()
	cfg.MaxSteps = steps
	dir := t.TempDir()
	_, errs := runCkpt(t, n, cfg, Checkpointing{Dir: dir, Every: 100, ResumeFile: resume}, 0)
	noErrs(t, errs)
	files, _ := ckpt.List(dir)
	if len(files) != 1 || filepath.Base(files[0]) != ckpt.Name(steps) {
		t.Fatalf("checkpoints %v, want one at step %d", files, steps)
	}
	return files[0]
}

// readCheckpointFile decodes the checkpoint at path.
func readCheckpointFile(t *testing.T, path string) *ckpt.File {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := ckpt.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

// writeCheckpointFile encodes ck into a file of its own and returns its
// path.
func writeCheckpointFile(t *testing.T, ck *ckpt.File) string {
	t.Helper()
	raw, err := ck.Encode()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "ckpt.npz")
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestADPSGDCheckpoints (issue 20): AD-PSGD writes a checkpoint at each
// synchronisation point the epoch schedule picks and at the end: every
// rank's own model and optimizer state, the consensus model as the
// weights, the position the next epoch and every rank's steps together.
// Resumed on as many ranks, each rank starts from its own state and
// training goes on from the next epoch; on another number, from the
// consensus (with the gradient switched off, the run ends with the
// checkpoint's consensus weights).
func TestADPSGDCheckpoints(t *testing.T) {
	cfg := gossipCfg(SyncADPSGD, gossip.Ring)
	cfg.Epochs = 3
	dir := t.TempDir()
	res, errs := runWorldCkpt(t, 3, cfg, Checkpointing{Dir: dir, EveryEpochs: 1, Keep: 10})
	noErrs(t, errs)
	files, _ := ckpt.List(dir)
	if len(files) != 3 {
		t.Fatalf("checkpoints %v, want one at each of the 3 synchronisation points", files)
	}
	first := readCheckpointFile(t, files[2]) // the oldest: after epoch 1
	m := first.Meta
	if m.Epoch != 2 || m.Step != 0 || m.Steps <= 0 || m.Steps >= res[0].Steps || len(first.RankStates) != 3 || m.Sync != "adpsgd" {
		t.Fatalf("the epoch-1 checkpoint: position %+v, %d rank states; %d steps in all", m.Position, len(first.RankStates), res[0].Steps)
	}
	p := len(first.Params)
	for i := 0; i < p; i += 37 {
		var sum float64
		for _, st := range first.RankStates {
			sum += float64(st[i])
		}
		if d := math.Abs(sum/3 - float64(first.Params[i])); d > 1e-5 {
			t.Fatalf("weight %d: %v, the ranks' average %v", i, first.Params[i], sum/3)
		}
	}
	if last := readCheckpointFile(t, files[0]); last.Meta.Epoch != 4 || last.Meta.Steps != res[0].Steps {
		t.Errorf("the last checkpoint: position %+v, want epoch 4 and the run's %d steps", last.Meta.Position, res[0].Steps)
	}

	// On as many ranks: epochs 2 and 3 only, and more steps in all.
	again, errs := runCkpt(t, 3, cfg, Checkpointing{ResumeFile: files[2]}, 0)
	noErrs(t, errs)
	if len(again[0].Epochs) != 2 || again[0].Epochs[0].Epoch != 2 || again[0].Steps <= m.Steps {
		t.Errorf("resumed on 3 ranks: epochs %d (first %d), %d steps; want 2 and 3, more than %d", len(again[0].Epochs), again[0].Epochs[0].Epoch, again[0].Steps, m.Steps)
	}
	// On 2 ranks with the gradient switched off: every rank starts from
	// the consensus model, which averaging identical models keeps.
	decentral.GossipTest.Frozen = true
	two, errs := runCkpt(t, 2, cfg, Checkpointing{ResumeFile: files[2]}, 0)
	decentral.GossipTest.Frozen = false
	noErrs(t, errs)
	if !slices.Equal(finalParams(t, two), first.Params) {
		t.Error("resumed on 2 ranks, frozen: other weights than the checkpoint's consensus model")
	}
	// And on 4 ranks to the end.
	_, errs = runCkpt(t, 4, cfg, Checkpointing{ResumeFile: files[2]}, 0)
	noErrs(t, errs)
}

// TestResumeOtherRanksKeepsStatistics (issue 29): a checkpoint of 2 ranks
// resumed on 3 starts from its batch-norm statistics (before the fix every
// resume started them at mean 0, variance 1): with no step left to run,
// the run ends with the checkpoint's statistics.
func TestResumeOtherRanksKeepsStatistics(t *testing.T) {
	b := bnCfg()
	cfg := synthCfg()
	cfg.Model, cfg.Net, cfg.Data = b.Model, b.Net, b.Data
	ck := checkpointAt(t, 2, cfg, 5, "")
	want := readCheckpointFile(t, ck).Buffers
	if len(want) == 0 {
		t.Fatal("the checkpoint holds no statistics")
	}
	cfg.MaxSteps = 5
	res, errs := runCkpt(t, 3, cfg, Checkpointing{ResumeFile: ck}, 0)
	noErrs(t, errs)
	if d := numtest.MaxRelDiff(res[0].ModelState, want); len(res[0].ModelState) != len(want) || d > 1e-7 {
		t.Errorf("resumed on 3 ranks with no step to run: statistics %.3g away from the checkpoint's", d)
	}
}
