// Package engine is the loop's side of data-parallel training: it sets a
// job up (data shards, model, the strategy's unit from the registry), runs
// the one training loop with the Strategy the unit builds, evaluates, and
// writes metrics, checkpoints and weights. It names no strategy: package
// trainer, above it, registers them (Register) and holds their code, so
// the compiler keeps the loop from reaching into one. It talks to other
// ranks only through a collectives.Comm and computes only through a
// kernels.Backend, so it runs the same in one process (tests, on the
// in-process transport) and under mpirun.
//
// Where things are (top to bottom: `make shape` measures the uses that
// point up, under a tenth):
//   - job.go: set-up and dispatch (Trainer.Run); jobtype.go: Result,
//     Trainer and one job's state (Job, what a strategy reads and calls).
//   - strategy.go: the registry (Register, UnitOf) and Unit, what a
//     strategy owns besides its steps: its settings (config.Rules), its
//     ranks, how it runs, its part of a checkpoint; BaseUnit its defaults.
//   - config.go: package config's names under this package's API;
//     errors.go: the errors a run returns.
//   - loop.go: the epoch/step loop; steps.go: the Strategy interface it
//     steps through, its optional parts (Hooks), the pace of a strategy
//     whose ranks run on their own (Pacer), the step schedule;
//     schedule.go: the learning rate of each step; stats.go: what is
//     measured.
//   - state.go: TrainState, the resumable training state; checkpoint.go
//     (what a checkpoint holds, resume, the stop vote), finish.go,
//     ckptlock.go, lastword.go and lastword_parts.go (emergency
//     checkpoints), reshard.go; ../ckpt: the checkpoint file and folder.
//   - convchoice.go: which kernels run each convolution, agreed by all
//     ranks (--kernels auto); buffers.go: batch-norm statistics across the
//     ranks; eval.go, gather.go, clip.go: what several strategies share.
package engine

import (
	"fmt"
	"strings"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer/config"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/model"
	"github.com/dml-project/dml/trainer/trace"
)

// Run loads the data cfg names and trains on it. Every rank of the Comm
// calls it with the same cfg. Up to the start of training the ranks fail
// together: a rank whose data cannot be loaded or whose model would not
// fit in its memory tells the others (AgreeToStart: each returns a
// *StartError), and ranks that loaded different data all return
// ErrConfigMismatch. Later, a rank that fails returns its error without
// telling the others: they fail too once they wait for it longer than the
// transport's timeout (ps: Config.Timeout). The CLI aborts the whole job on
// such an error instead.
func (t *Trainer) Run(cfg Config) (_ *Result, err error) {
	defer kernels.RecoverOp(&err) // a library failing between ops (downloads, the exchange)
	t.lastWord.Store(nil)
	t.serverWord.Store(nil)
	if err := t.check(cfg); err != nil {
		return nil, err
	}
	unlock, err := t.lockCheckpoints(cfg)
	if err != nil {
		return nil, err
	}
	defer unlock()
	err = t.checkDataMemory(cfg)
	if cfg.Model == SparseLogreg {
		var train, test *data.Sparse
		if err == nil && cfg.Data.Name == "libsvm" {
			err = config.CheckFiles(t.memoryCheck("train on a smaller file"), cfg.Data.Train, cfg.Data.Test)
		}
		if err == nil {
			train, test, err = cfg.Data.LoadSparse(cfg.Seed)
		}
		var fp uint64
		if err == nil {
			fp = SparseFingerprint(train, test)
		}
		if err == nil {
			err = checkClasses(cfg.Data, train.Classes, train.LabelValues)
		}
		if err := AgreeToStart(t.Comm, "load its data", err, fp); err != nil {
			return nil, err
		}
		return t.runSparse(cfg, train, test)
	}
	var train, test data.DenseSource
	if err == nil {
		train, test, err = cfg.Data.OpenChecked(cfg.Seed, t.memoryCheck("train on a smaller file, or sparse (Config.Model sparse-logreg)"))
	}
	return t.startDense(cfg, train, test, err)
}

// RunWithData trains a dense model on the given full training and test
// sets; each rank keeps only its strided shard of both. Every rank must
// pass the same data (checked, as Run does).
func (t *Trainer) RunWithData(cfg Config, train, test *data.Dense) (*Result, error) {
	if err := t.check(cfg); err != nil {
		return nil, err
	}
	unlock, err := t.lockCheckpoints(cfg)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if cfg.Model == SparseLogreg {
		return nil, bad("Model", "sparse-logreg trains on sparse data (use Run)")
	}
	return t.startDense(cfg, train, test, nil)
}

// startDense closes the start-up (the rank's loading error, its model's
// size, every rank's data fingerprint: AgreeToStart) and trains.
func (t *Trainer) startDense(cfg Config, train, test data.DenseSource, err error) (*Result, error) {
	if err == nil {
		_, _, classes := train.Shape()
		err = checkClasses(cfg.Data, classes, classLabels(train))
	}
	if err == nil {
		err = t.checkModelMemory(cfg, train, test)
	}
	var fp uint64
	if err == nil {
		fp, err = SourceFingerprint(train, test)
	}
	if err := AgreeToStart(t.Comm, "load its data", err, fp); err != nil {
		return nil, err
	}
	return t.runDense(cfg, train, test)
}

// check validates cfg for this world and compares it with every rank's.
func (t *Trainer) check(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := cfg.ValidateWorld(t.Comm.Size()); err != nil {
		return err
	}
	if t.Start != nil && !UnitOf(cfg.Sync).TakesTrainState() {
		return bad("Sync", "%v cannot resume from a TrainState (its ranks do not all hold the same weights and optimizer state): use allreduce", cfg.Sync)
	}
	if err := t.checkCheckpointing(cfg); err != nil {
		return err
	}
	return CheckSameConfig(t.Comm, cfg)
}

// runDense sets up a dense model (mlp, softmax, logreg) on every rank and
// hands it to the strategy --sync names (its unit's run). A rank reads only the rows it
// keeps from train and test (see DataConfig.Open).
func (t *Trainer) runDense(cfg Config, train, test data.DenseSource) (*Result, error) {
	trainRows, _, classes := train.Shape()
	testRows, _, _ := test.Shape()
	j, err := t.newJob(cfg, trainRows)
	if err != nil {
		return nil, err
	}
	j.labels = classLabels(train)
	j.trainSrc = train
	j.sayClasses(classes)
	arch, err := BuildArch(cfg, data.SampleShape(train), classes)
	if err != nil {
		return nil, err
	}
	var shard *data.Dense // nil on a parameter server
	if j.ShardIdx >= 0 {
		if shard, err = train.Subset(j.trainShard()); err != nil {
			return nil, err
		}
	}
	testShard, err := test.Subset(data.StridedShard(testRows, t.Comm.Rank(), t.Comm.Size()))
	if err != nil {
		return nil, err
	}
	// Buffers for at most a batch, and never more rows than a shard holds
	// (a --batch far above the data size must not allocate for it).
	rows := max(1, min(j.Micro, max(j.Sched.shard, testShard.Rows)))
	m, err := j.newModel(arch, rows)
	if err != nil {
		return nil, err
	}
	defer m.Free()
	m.Tracer = j.Trace
	m.Interrupt = t.Interrupt
	m.UseGraph = t.CUDAGraph
	if err := j.augment(m, data.SampleShape(train)); err != nil {
		return nil, err
	}
	j.dropoutKeys(m)
	// Identical initial weights everywhere: rank 0's, broadcast.
	params := arch.InitParams(cfg.Seed)
	if err := collectives.Broadcast(t.Comm, params, 0); err != nil {
		return nil, fmt.Errorf("broadcasting initial weights: %w", err)
	}
	if j.Resume, err = j.loadResume(arch); err != nil {
		return nil, err
	}
	if j.Resume != nil {
		copy(params, j.Resume.Params)
		// The batch norms' running statistics resume too (read by
		// loadResume just above: uploading them before it did nothing).
		if len(j.Resume.Buffers) > 0 {
			if err := t.Backend.Upload(m.State, j.Resume.Buffers); err != nil {
				return nil, err
			}
		}
	}
	return UnitOf(cfg.Sync).Run(j, DenseSetup{M: m, Params: params, Shard: shard, TestShard: testShard, Test: test, TestRows: testRows})
}

// runSparse sets sparse-logreg up and trains it through the strategy
// (the parameter server's: trainer/paramserver).
func (t *Trainer) runSparse(cfg Config, train, test *data.Sparse) (*Result, error) {
	if train.Classes > 2 || test.Classes > 2 {
		return nil, bad("Model", "sparse-logreg is binary, but the data has %d classes", max(train.Classes, test.Classes))
	}
	j, err := t.newJob(cfg, train.Rows)
	if err != nil {
		return nil, err
	}
	j.labels = train.LabelValues
	j.sayClasses(train.Classes)
	arch, err := model.NewArch(train.Cols, nil, 1, model.SigmoidCE)
	if err != nil {
		return nil, err
	}
	var shard *data.Sparse
	if j.ShardIdx >= 0 {
		if shard, err = train.Subset(j.trainShard()); err != nil {
			return nil, err
		}
	}
	params := make([]float32, arch.NumParams()) // logistic regression starts at zero
	if j.Resume, err = j.loadResume(arch); err != nil {
		return nil, err
	}
	if j.Resume != nil {
		copy(params, j.Resume.Params)
	}
	return UnitOf(cfg.Sync).RunSparse(j, SparseSetup{Arch: arch, Params: params, Train: train, Shard: shard, Test: test})
}

// CheckSameConfig all-gathers every rank's Config.Hash and fails on every
// rank if they are not all equal, with a *ConfigMismatchError naming the
// ranks that differ from rank 0 and the first setting in which they do.
func CheckSameConfig(c collectives.Comm, cfg Config) error {
	differ, _, err := collectives.Agree(c, cfg.Hash())
	if err != nil {
		return fmt.Errorf("comparing configurations: %w", err)
	}
	if len(differ) > 0 {
		return describeMismatch(c, cfg, differ)
	}
	return nil
}

// augment sets m up to augment its training batches (Config.Augment):
// sample i of this rank's shard is sample shardIdx + i·ranks of the
// training set (data.StridedShard), so every sample is transformed as on
// any other number of ranks, and the epoch the loop is in (augEpoch).
func (j *Job) augment(m *model.Model, shape data.Shape) error {
	a, err := data.ParseAugment(j.Cfg.Augment)
	if err != nil || !a.On() {
		return err
	}
	if shape.Flat() || shape.H < 2 || shape.W < 2 {
		return bad("Augment", "%s: the samples are not images (their shape is %v): augmentation is for image data", a, shape)
	}
	var global []int
	var img []float32
	m.Augment = func(x []float32, idx []int) {
		global = j.globalRows(idx, global[:0])
		img = a.Apply(x, shape, global, j.Cfg.Seed, j.augEpoch, img)
	}
	return nil
}

// dropoutKeys sets m's dropout row keys (used where its network has
// dropout): a hash of the seed, the epoch the loop is in (augEpoch) and
// the sample's index in the whole training set, so that every sample is
// masked as on any other number of ranks, and as before a resume.
func (j *Job) dropoutKeys(m *model.Model) {
	var global []int
	m.RowKeys = func(keys []uint32, idx []int) {
		global = j.globalRows(idx, global[:0])
		for r, g := range global {
			keys[r] = kernels.DropoutRowKey(j.Cfg.Seed, j.augEpoch, g)
		}
	}
}

// globalRows appends to dst the training set's rows of the batch idx
// (indices into this rank's shard, or in a re-dealt epoch into its part,
// reshard.go).
func (j *Job) globalRows(idx, dst []int) []int {
	for _, i := range idx {
		if j.partRows != nil {
			dst = append(dst, j.partRows[i])
			continue
		}
		dst = append(dst, j.ShardIdx+i*j.Sched.Ranks)
	}
	return dst
}

// newJob sets up the shard bookkeeping: the ranks that train (under ps,
// the workers: ranks Servers..N-1) share the training set, and the ranks
// that serve hold none of it.
func (t *Trainer) newJob(cfg Config, nTrain int) (*Job, error) {
	n, rank := t.Comm.Size(), t.Comm.Rank()
	j := &Job{Trainer: t, Cfg: cfg, ShardIdx: rank, Trace: trace.OrNop(t.Tracer), lastCheckpointSteps: -1, askedBatch: cfg.Batch}
	servers := UnitOf(cfg.Sync).Servers(cfg)
	members := n - servers
	j.ShardIdx, j.Reporter = rank-servers, servers
	if err := data.CheckShards(nTrain, members); err != nil {
		return nil, config.Usage(fmt.Errorf("training set: %w", err)) // every rank finds it alike
	}
	j.Sched = newSchedule(nTrain, members, stepBatch(cfg.Batch, cfg.Accumulate))
	if plan := NewLRPlan(cfg, members); !plan.constant() {
		j.lrs = &plan
	}
	// Every strategy computes with the batch the schedule keeps (at most
	// the largest shard), so none can overflow on a huge --batch.
	j.Cfg.Batch = j.Sched.Batch
	// The model holds a micro-batch: --batch rows (at most the step's).
	j.Micro = min(cfg.Batch, j.Sched.Batch)
	if j.ShardIdx >= 0 {
		j.Sched.shard = data.ShardLen(nTrain, j.ShardIdx, members)
	}
	return j, nil
}

// trainShard is this rank's strided shard of the training set's rows.
func (j *Job) trainShard() []int {
	return data.StridedShard(j.Sched.N, j.ShardIdx, j.Sched.Ranks)
}

// classLabels is a source's class labels, where it keeps them (LIBSVM data
// loaded dense); nil: class k was labelled k.
func classLabels(s data.DenseSource) []int64 {
	if l, ok := s.(interface{ ClassLabels() []int64 }); ok {
		return l.ClassLabels()
	}
	return nil
}

// inferred says how the classes of data d were found: "labels 0 … 9 of
// FILE", "labels -1 1 of FILE, as classes 0 … 1".
func inferred(d DataConfig, classes int, labels []int64) string {
	file := d.Train
	if d.Name == "idx" {
		if _, l, ok := strings.Cut(d.Train, ","); ok {
			file = l
		}
	}
	if model.IdentityLabels(labels) {
		return fmt.Sprintf("labels 0 … %d of %s", classes-1, file)
	}
	shown := labels
	more := ""
	if len(shown) > 12 {
		shown, more = shown[:12], fmt.Sprintf(" … (%d in all)", len(labels))
	}
	return fmt.Sprintf("labels %s%s of %s, as classes 0 … %d", strings.Trim(fmt.Sprint(shown), "[]"), more, file, classes-1)
}

// checkClasses refuses idx or libsvm data whose inferred class count is
// not the one the job expects (DataConfig.ExpectClasses): a corrupt label
// byte of 200 made a 201-class model without a word.
func checkClasses(d DataConfig, classes int, labels []int64) error {
	if d.ExpectClasses <= 0 || (d.Name != "idx" && d.Name != "libsvm") || classes == d.ExpectClasses {
		return nil
	}
	return bad("Data.Classes", "%d: the data has %d classes (%s)", d.ExpectClasses, classes, inferred(d, classes, labels))
}

// sayClasses tells, for data whose classes are inferred from its labels
// (idx, libsvm), how many there are and from what.
func (j *Job) sayClasses(classes int) {
	if d := j.Cfg.Data; d.Name == "idx" || d.Name == "libsvm" {
		j.printf("classes: %d, from %s\n", classes, inferred(d, classes, j.labels))
	}
}
