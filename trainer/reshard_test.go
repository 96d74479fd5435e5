package trainer

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/gossip"
)

// TestEpochParts: whatever stretches an epoch ran at whatever sizes, what
// they trained and the parts dealt to the next ranks hold every sample of
// the epoch exactly once; the parts differ in length by at most one.
func TestEpochParts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		n := 1 + r.IntN(300)
		shuffle := r.IntN(2) == 0
		var segs []Segment
		trained := map[int]int{}
		// The first stretch walks the standard order of its ranks.
		ranks := 1 + r.IntN(min(n, 6))
		for k := range 1 + r.IntN(3) {
			batch := 1 + r.IntN(9)
			var parts [][]int
			if k == 0 {
				// No step yet, dealt to as many ranks: the standard
				// parts (the merge in turn and the deal in turn undo each
				// other on strided shards).
				parts = epochParts(n, 7, 3, shuffle, []Segment{{Ranks: ranks, Steps: 0, Batch: 1}}, ranks)
				for q, p := range parts {
					order := data.EpochOrder(data.ShardLen(n, q, ranks), shardSeed(7, q), 3, shuffle)
					for i, o := range order {
						if p[i] != q+o*ranks {
							t.Fatalf("n %d, %d ranks: part %d is not shard %d's epoch order", n, ranks, q, q)
						}
					}
				}
			} else {
				parts = epochParts(n, 7, 3, shuffle, segs, ranks)
			}
			steps := r.IntN(partSteps(parts, batch) + 1)
			for _, p := range parts {
				for _, row := range p[:min(steps*batch, len(p))] {
					trained[row]++
				}
			}
			segs = append(segs, Segment{Ranks: ranks, Steps: steps, Batch: batch})
			ranks = 1 + r.IntN(6)
		}
		parts := epochParts(n, 7, 3, shuffle, segs, ranks)
		for q, p := range parts {
			if len(p) > len(parts[0]) || len(parts[0])-len(p) > 1 {
				t.Fatalf("%+v to %d ranks: part %d has %d rows, part 0 %d", segs, ranks, q, len(p), len(parts[0]))
			}
			for _, row := range p {
				trained[row]++
			}
		}
		for row := range n {
			if trained[row] != 1 {
				t.Fatalf("n %d, %+v then %d ranks: row %d trained %d times in the epoch", n, segs, ranks, row, trained[row])
			}
		}
	}
}

// rowsLog records the training rows of every step (stepRowsHook), by
// epoch.
type rowsLog struct {
	mu   sync.Mutex
	rows map[int][]int
}

func logRows(t *testing.T) *rowsLog {
	l := &rowsLog{rows: map[int][]int{}}
	stepRowsHook = func(_, epoch int, rows []int) {
		l.mu.Lock()
		l.rows[epoch] = append(l.rows[epoch], rows...)
		l.mu.Unlock()
	}
	t.Cleanup(func() { stepRowsHook = nil })
	return l
}

// onceEach checks that every row epoch trained was trained once and that
// they are the rows 0 … n−1, and returns n.
func (l *rowsLog) onceEach(t *testing.T, epoch int) int {
	t.Helper()
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
	log := logRows(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	a := cfg
	a.MaxSteps = 5 // of 13 per epoch on 2 ranks
	_, errs := runCkpt(t, 2, a, Checkpointing{Dir: dirA, Every: 100}, 0)
	noErrs(t, errs)
	filesA, _ := listCheckpoints(dirA)

	// 3 ranks, 2 steps into the rest, then 4 ranks to the end.
	b := cfg
	b.MaxSteps = 7
	var out strings.Builder
	_, errs = runOut(t, 3, b, Checkpointing{Dir: dirB, Every: 100, ResumeFile: filesA[0]}, &out)
	noErrs(t, errs)
	if s := out.String(); !strings.Contains(s, "written by 2 training ranks at step 5 of epoch 1: the rest of the epoch goes to these 3") {
		t.Errorf("the 3-rank run does not say it re-deals the epoch:\n%s", s)
	}
	filesB, _ := listCheckpoints(dirB)
	if len(filesB) != 1 || filepath.Base(filesB[0]) != checkpointName(7) {
		t.Fatalf("checkpoints %v, want one at step 7", filesB)
	}
	res, errs := runCkpt(t, 4, cfg, Checkpointing{ResumeFile: filesB[0]}, 0)
	noErrs(t, errs)
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
	straight, errs := runCkpt(t, 3, cfg, Checkpointing{ResumeFile: filesA[0]}, 0)
	noErrs(t, errs)
	again, errs := runCkpt(t, 3, cfg, Checkpointing{ResumeFile: filesB[0]}, 0)
	noErrs(t, errs)
	if !slices.Equal(finalParams(t, again), finalParams(t, straight)) {
		t.Error("resumed inside the re-dealt rest at its own size: other weights than straight through")
	}
	if again[0].Steps != straight[0].Steps {
		t.Errorf("%d steps resumed, %d straight", again[0].Steps, straight[0].Steps)
	}
}

// runOut is runCkpt without a stop request, rank 0 printing to out.
func runOut(t *testing.T, n int, cfg Config, ck Checkpointing, out *strings.Builder) ([]*Result, []error) {
	t.Helper()
	w := local.NewWorld(n)
	w.SetTimeout(20 * time.Second)
	res := make([]*Result, n)
	errs := w.Run(func(c *local.Comm) error {
		mine := ck
		tr := &Trainer{Comm: c, Backend: cpu.New(), Checkpoint: &mine}
		if c.Rank() == 0 {
			tr.Out = out
		}
		var err error
		res[c.Rank()], err = tr.Run(cfg)
		return err
	})
	return res, errs
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
	log := logRows(t)
	dir := t.TempDir()
	a := cfg
	a.MaxSteps = 5
	_, errs := runCkpt(t, 3, a, Checkpointing{Dir: dir, Every: 100}, 0)
	noErrs(t, errs)
	files, _ := listCheckpoints(dir)
	straight := finalParams(t, mustRun(t, 3, cfg)[1:])

	two := cfg
	two.PS.Servers = 2
	res, errs := runCkpt(t, 4, two, Checkpointing{ResumeFile: files[0]}, 0)
	noErrs(t, errs)
	if !slices.Equal(finalParams(t, res[2:]), straight) {
		t.Error("resumed on 2 servers: other weights than 1 server straight through")
	}

	clear(log.rows)
	_, errs = runCkpt(t, 3, a, Checkpointing{Dir: t.TempDir(), Every: 100}, 0)
	noErrs(t, errs)
	res, errs = runCkpt(t, 4, cfg, Checkpointing{ResumeFile: files[0]}, 0)
	noErrs(t, errs)
	if log.onceEach(t, 1) != len(log.rows[2]) {
		t.Errorf("epoch 1 trained %d rows over the two runs, epoch 2 %d", len(log.rows[1]), len(log.rows[2]))
	}
	if res[1].Steps <= 5 {
		t.Errorf("the resumed run counts %d steps", res[1].Steps)
	}

	ssp := cfg
	ssp.PS.Consistency, ssp.PS.Staleness = ps.SSP, 2
	d2 := t.TempDir()
	_, errs = runCkpt(t, 3, func() Config { c := ssp; c.MaxSteps = 5; return c }(), Checkpointing{Dir: d2, Every: 100}, 0)
	noErrs(t, errs)
	f2, _ := listCheckpoints(d2)
	_, errs = runCkpt(t, 4, ssp, Checkpointing{ResumeFile: f2[0]}, 0)
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
	log := logRows(t)
	dir := t.TempDir()
	a := cfg
	a.MaxSteps = 5
	_, errs := runCkpt(t, 3, a, Checkpointing{Dir: dir, Every: 100}, 0)
	noErrs(t, errs)
	files, _ := listCheckpoints(dir)
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	ck, err := decodeCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	none := cfg
	none.MaxSteps = 5
	res, errs := runCkpt(t, 4, none, Checkpointing{ResumeFile: files[0]}, 0)
	noErrs(t, errs)
	if !slices.Equal(finalParams(t, res), ck.Params) {
		t.Error("resumed on 4 ranks without a step: other weights than the checkpoint's consensus model")
	}
	res, errs = runCkpt(t, 4, cfg, Checkpointing{ResumeFile: files[0]}, 0)
	noErrs(t, errs)
	if log.onceEach(t, 1) != len(log.rows[2]) || res[0].Steps <= 5 {
		t.Errorf("epoch 1 trained %d rows over the two runs, epoch 2 %d; %d steps", len(log.rows[1]), len(log.rows[2]), res[0].Steps)
	}
}

// TestConsensusState: the weights given, then each optimizer value
// averaged over the ranks.
func TestConsensusState(t *testing.T) {
	got := consensusState([]float32{1, 2}, [][]float32{{9, 9, 3, 4}, {8, 8, 6, 1}, {7, 7, 0, 1}})
	if want := []float32{1, 2, 3, 2}; !slices.Equal(got, want) {
		t.Errorf("consensusState = %v, want %v", got, want)
	}
	if got := consensusState([]float32{1, 2}, [][]float32{{5, 6}, {7, 8}}); !slices.Equal(got, []float32{1, 2}) {
		t.Errorf("without optimizer state: %v", got)
	}
}
