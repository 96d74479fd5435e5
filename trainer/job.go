// Package trainer is data-parallel training: it sets a job up (data shards,
// model, strategy), runs the one training loop (loop.go) with the step
// strategy --sync asks for (sync_allreduce.go with its local-SGD mode in
// sync_localsgd.go and compression in compress.go; sync_ps.go with its
// workers in ps_worker.go, their stop vote in ps_stopvote.go, Downpour in
// downpour.go, sync_sparse.go; sync_dpsgd.go and
// sync_adpsgd.go on decentral.go), evaluates, and writes metrics and
// weights. It talks to other ranks only
// through a collectives.Comm and computes only through a kernels.Backend,
// so it runs the same in one process (tests, on the in-process transport)
// and under mpirun.
//
// Where things are:
//   - config.go, enums.go: the typed Config, validated in one place.
//   - job.go: set-up and dispatch (Trainer.Run).
//   - loop.go: the epoch/step loop and the Strategy interface.
//   - sync_*.go: one file per strategy; accumulate.go: gradient
//     accumulation (--accumulate) under allreduce.
//   - state.go: TrainState, the resumable training state; checkpoint.go
//     (what a checkpoint holds, resume, the stop vote), ckptlock.go,
//     lastword*.go (emergency checkpoints), reshard.go; ckpt/: the
//     checkpoint file and folder themselves.
//   - strategy.go: the registry of strategies, each a unit that says its
//     settings (validate, foreign), its ranks, its part of a checkpoint;
//     the Strategy its steps run through has its optional parts in one
//     struct (hooks, loop.go).
//   - convchoice.go: which kernels run each convolution, agreed by all
//     ranks (--kernels auto).
//   - model/: the architecture (a layer kind per layer_*.go, and the
//     presets netPresets names), the Model on a Backend, optimizers, .npz
//     files.
//   - data/: datasets, shards and the sample order.
package trainer

import (
	"fmt"
	"io"
	"math"
	"strings"
	"sync/atomic"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/model"
	"github.com/dml-project/dml/trainer/trace"
)

// Result is what a finished run leaves: the per-epoch figures and the
// final weights (the same on every rank).
type Result struct {
	Arch   model.Arch
	Params []float32
	// ModelState is a network's batch-norm running statistics at the end
	// (Arch.StateTensors; nil for models without), averaged over the ranks
	// that train (syncState).
	ModelState []float32
	Epochs     []EpochStats // on the reporting rank (rank 0; the first worker under ps)
	Steps      int          // steps run, counting those before a resumed State
	WallSec    float64
	TestAcc    float64 // at the end of training (NaN if never evaluated)
	// SamplesPerSec is the whole job's training throughput.
	SamplesPerSec float64
	// PS sums up the workers' parameter-server figures (with --sync ps).
	PS *PSStats
	// State is where training stopped, to resume from (sync allreduce;
	// nil under ps, whose weights and optimizer state live on the servers).
	State *TrainState
}

// Trainer holds what a run needs besides its Config.
type Trainer struct {
	Comm    collectives.Comm
	Backend kernels.Backend
	// Out receives the reporting rank's epoch lines and summary (nil: quiet).
	Out io.Writer
	// Warnings receives what goes wrong without ending the run (a metrics
	// file on a full disk), one line each, from the rank it happens on
	// (nil: not said).
	Warnings io.Writer
	// Progress draws a bar on Out while an epoch runs (reporting rank, terminals).
	Progress bool
	// Tracer, if not nil, receives spans of each step: step, batch,
	// forward, backward, download/upload, allreduce, pull, push, straggle,
	// update, evaluate (package trace). Nil costs nothing. For spans of
	// every op and message, wrap Comm and Backend with trace.Comm and
	// trace.Backend too. Goroutines beside the step loop (the overlapped
	// AllReduce, gossip, a passive rank's server, a ps server) record on
	// their own trace.Lane.
	Tracer trace.Tracer
	// CUDAGraph lets each training step's forward and backward pass run
	// as one recorded graph where the backend records them
	// (kernels.GraphOf: cuda, untraced) and the step hands nothing to the
	// host mid-way (one rank, or a strategy without per-layer downloads);
	// see model.Model.UseGraph. The weights are the same bits either way.
	CUDAGraph bool
	// Start, if not nil, resumes training from a saved state (sync
	// allreduce only): its weights and optimizer state replace the initial
	// ones and the loop starts at its (epoch, step).
	Start *TrainState
	// MemoryLimit, if positive, is the memory in bytes this rank may use
	// for its data and model: synthetic data and a dense model that need
	// more are refused before they are allocated (a usage error naming
	// the sizes), not left to the out-of-memory killer. MemorySource says
	// where the figure came from, for that message.
	MemoryLimit  int64
	MemorySource string
	// Checkpoint, if not nil, writes checkpoints and resumes from them
	// (checkpoint.go). Every rank must be given the same.
	Checkpoint *Checkpointing
	// Stop, if not nil, is asked at every step boundary whether this rank
	// wants training to stop (a signal came): the ranks agree on the step,
	// write a final checkpoint (with Checkpoint.Dir), and Run returns the
	// result so far with an error wrapping ErrInterrupted. Every rank must
	// have one, or none.
	Stop func() bool
	// FirstStep, if not nil, is called once, after the first step this
	// rank runs, with the steps run since the job's beginning (a
	// supervisor times its recovery by it: dml launch).
	FirstStep func(steps int)

	lastWord   atomic.Pointer[lastWord]   // LastWord's copy (lastword.go)
	serverWord atomic.Pointer[serverWord] // a ps server's (lastword_ps.go)
}

// Run loads the data cfg names and trains on it. Every rank of the Comm
// calls it with the same cfg. Up to the start of training the ranks fail
// together: a rank whose data cannot be loaded or whose model would not
// fit in its memory tells the others (AgreeToStart: each returns a
// *StartError), and ranks that loaded different data all return
// ErrConfigMismatch. Later, a rank that fails returns its error without
// telling the others: they fail too once they wait for it longer than the
// transport's timeout (ps: Config.Timeout). The CLI aborts the whole job on
// such an error instead.
func (t *Trainer) Run(cfg Config) (*Result, error) {
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
			err = checkFiles(t.memoryCheck("train on a smaller file"), cfg.Data.Train, cfg.Data.Test)
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
		train, test, err = cfg.Data.openWithin(cfg.Seed, t.memoryCheck("train on a smaller file, or sparse (Config.Model sparse-logreg)"))
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
	if t.Start != nil && !cfg.Sync.unit().takesTrainState() {
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
	if j.shardIdx >= 0 {
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
	rows := max(1, min(j.micro, max(j.sched.shard, testShard.Rows)))
	m, err := j.newModel(arch, rows)
	if err != nil {
		return nil, err
	}
	defer m.Free()
	m.Tracer = j.tr
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
	if j.resume, err = j.loadResume(arch); err != nil {
		return nil, err
	}
	if j.resume != nil {
		copy(params, j.resume.Params)
		// The batch norms' running statistics resume too (read by
		// loadResume just above: uploading them before it did nothing).
		if len(j.resume.Buffers) > 0 {
			if err := t.Backend.Upload(m.State, j.resume.Buffers); err != nil {
				return nil, err
			}
		}
	}
	return cfg.Sync.unit().run(j, denseSetup{m: m, params: params, shard: shard, testShard: testShard, test: test, testRows: testRows})
}

// runSparse sets sparse-logreg up (sync_sparse.go) and trains it through
// the parameter server.
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
	if j.shardIdx >= 0 {
		if shard, err = train.Subset(j.trainShard()); err != nil {
			return nil, err
		}
	}
	params := make([]float32, arch.NumParams()) // logistic regression starts at zero
	if j.resume, err = j.loadResume(arch); err != nil {
		return nil, err
	}
	if j.resume != nil {
		copy(params, j.resume.Params)
	}
	evalAll := func(p []float32) (float64, []float32, error) {
		ev, err := EvaluateSparse(t.Comm, arch, p, test)
		return ev.Accuracy, nil, err
	}
	return j.runPS(arch, params, func(w *ps.Worker) (Strategy, error) {
		return &sparseWorker{psWorker: newPSWorker(j, w, arch), f: train.Cols, train: shard, test: test}, nil
	}, evalAll)
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

// BuildArch derives a dense model's architecture from the config and the
// data: its samples' shape (data.SampleShape) and its classes.
func BuildArch(cfg Config, shape data.Shape, classes int) (model.Arch, error) {
	features := shape.Size()
	if shape.T > 0 && !cfg.Model.IsNetwork() {
		return model.Arch{}, bad("Model", "%v on a token sequence (--data text): it trains --model gpt, or a model file of sequence layers", cfg.Model)
	}
	switch cfg.Model {
	case MLP:
		return model.NewArch(features, cfg.Hidden, classes, model.SoftmaxCE)
	case Softmax:
		return model.NewArch(features, nil, classes, model.SoftmaxCE)
	case Logreg:
		if classes != 2 {
			return model.Arch{}, bad("Model", "logreg is binary, but the data has %d classes (use model softmax)", classes)
		}
		return model.NewArch(features, nil, 1, model.SigmoidCE)
	}
	if !cfg.Model.IsNetwork() {
		return model.Arch{}, fmt.Errorf("%v is not a dense model", cfg.Model)
	}
	loss := model.SoftmaxCE
	if shape.T > 0 { // a token sequence: --data text
		loss = model.TokenCE
	}
	a, err := model.NewNet(shape, NetLayers(cfg, classes, shape), classes, loss)
	switch {
	case err == nil:
		return a, nil
	case cfg.Model == NetFile:
		return a, bad("Net", "on samples of %v: %v", shape, err)
	}
	return a, bad("Model", "%v on samples of %v: %v (it takes %s)", cfg.Model, shape, err, netPresets[cfg.Model].takes)
}

// NetLayers is a network model's layers for samples of shape and classes
// classes: a preset's or the model file's; nil for the MLP family.
func NetLayers(cfg Config, classes int, shape data.Shape) []model.LayerSpec {
	if p, ok := netPresets[cfg.Model]; ok {
		return p.layers(cfg, classes, shape)
	}
	if cfg.Model == NetFile {
		return cfg.Net
	}
	return nil
}

// syncState sets every rank's batch-norm running statistics to their
// average over the ranks that train (a collective over every rank of the
// Comm; trains: this rank is one of them), returning it; nil and no
// collective for a model without state. Running statistics do not enter
// training (batch norm trains on each batch's own statistics), so the
// weights are the same whenever this runs; it runs where the statistics
// are used or kept: evaluations that every rank takes part in, checkpoints,
// the end of training. Each rank's statistics come from its own batches,
// as under PyTorch DDP without SyncBatchNorm.
func (j *job) syncState(m *model.Model, trains bool) ([]float32, error) {
	n := m.Arch.NumState()
	if n == 0 {
		return nil, nil
	}
	st := make([]float32, n+1)
	if trains {
		if err := j.Backend.Download(st[:n], m.State); err != nil {
			return nil, err
		}
		st[n] = 1
	}
	if err := collectives.Allreduce(j.Comm, st, collectives.Sum, collectives.Tree); err != nil {
		return nil, fmt.Errorf("averaging the batch-norm statistics: %w", err)
	}
	for i := range n {
		st[i] /= st[n]
	}
	st = st[:n]
	upload := func() error { return j.Backend.Upload(m.State, st) }
	var err error
	if j.lw != nil { // the allreduce strategy's model, whose statistics LastWord reads
		err = j.lw.changeState(upload)
	} else {
		err = upload()
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// augment sets m up to augment its training batches (Config.Augment):
// sample i of this rank's shard is sample shardIdx + i·ranks of the
// training set (data.StridedShard), so every sample is transformed as on
// any other number of ranks, and the epoch the loop is in (augEpoch).
func (j *job) augment(m *model.Model, shape data.Shape) error {
	a, err := data.ParseAugment(j.cfg.Augment)
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
		img = a.Apply(x, shape, global, j.cfg.Seed, j.augEpoch, img)
	}
	return nil
}

// dropoutKeys sets m's dropout row keys (used where its network has
// dropout): a hash of the seed, the epoch the loop is in (augEpoch) and
// the sample's index in the whole training set, so that every sample is
// masked as on any other number of ranks, and as before a resume.
func (j *job) dropoutKeys(m *model.Model) {
	var global []int
	m.RowKeys = func(keys []uint32, idx []int) {
		global = j.globalRows(idx, global[:0])
		for r, g := range global {
			keys[r] = kernels.DropoutRowKey(j.cfg.Seed, j.augEpoch, g)
		}
	}
}

// globalRows appends to dst the training set's rows of the batch idx
// (indices into this rank's shard, or in a re-dealt epoch into its part,
// reshard.go).
func (j *job) globalRows(idx, dst []int) []int {
	for _, i := range idx {
		if j.partRows != nil {
			dst = append(dst, j.partRows[i])
			continue
		}
		dst = append(dst, j.shardIdx+i*j.sched.ranks)
	}
	return dst
}

// job is what every rank knows about a run once it is set up: the
// configuration, who it is, which shard it trains on and the schedule.
// Strategies hold the rest (model, worker, buffers).
type job struct {
	*Trainer
	cfg      Config
	labels   []int64 // the training data's class labels (nil: class k is label k), saved with the weights
	sched    schedule
	epochLen int          // the running epoch's steps (the loop's; a re-dealt epoch has fewer)
	tr       trace.Tracer // never nil
	shardIdx int          // which training shard: the rank, or the worker's index under ps (-1: a server)
	reporter int          // the rank that prints epoch lines and writes --metrics

	resume         *resumed // the state to start from (nil: fresh)
	interrupted    bool     // the loop stopped on Stop
	stoppedAt      Position // where it stopped
	lastCheckpoint string   // the file last written (reporting rank)
	// ckptSeen: the checkpoint files prune has judged; ckptSize: the
	// largest this job wrote (checkpoint.go).
	ckptSeen map[string]ckptSeen
	ckptSize int64
	augEpoch int // the epoch of the step the loop runs (augmentation)
	// lastCheckpointSteps is the position (steps run) of the last
	// checkpoint, on every training rank (-1: none yet).
	lastCheckpointSteps int
	// trainSrc is the training set (dense data), for the rows of a
	// re-dealt epoch (reshard.go); partRows are this rank's rows in it,
	// partLens every rank's count (nil outside such an epoch).
	trainSrc           data.DenseSource
	partRows, partLens []int
	// askedBatch is Config.Batch as given (cfg.Batch is capped at the
	// largest shard, and is the step's rows: Accumulate micro-batches);
	// micro is a micro-batch's rows, what the model holds.
	micro      int
	askedBatch int
	// lw keeps the state of the last step boundary for LastWord (nil:
	// not kept).
	lw *lastWord
	// stepped: FirstStep has been called.
	stepped bool
	// lrs is the learning-rate plan (schedule.go; nil: every step has
	// Opt.LR), epochLR the rates of the epoch's steps so far.
	lrs     *lrPlan
	epochLR []float32
}

// newJob sets up the shard bookkeeping: the ranks that train (under ps,
// the workers: ranks Servers..N-1) share the training set, and the ranks
// that serve hold none of it.
func (t *Trainer) newJob(cfg Config, nTrain int) (*job, error) {
	n, rank := t.Comm.Size(), t.Comm.Rank()
	j := &job{Trainer: t, cfg: cfg, shardIdx: rank, tr: trace.OrNop(t.Tracer), lastCheckpointSteps: -1, askedBatch: cfg.Batch}
	servers := cfg.Sync.unit().servers(cfg)
	members := n - servers
	j.shardIdx, j.reporter = rank-servers, servers
	if err := data.CheckShards(nTrain, members); err != nil {
		return nil, fmt.Errorf("training set: %w", err)
	}
	j.sched = newSchedule(nTrain, members, stepBatch(cfg.Batch, cfg.Accumulate))
	if plan := newLRPlan(cfg, members); !plan.constant() {
		j.lrs = &plan
	}
	// Every strategy computes with the batch the schedule keeps (at most
	// the largest shard), so none can overflow on a huge --batch.
	j.cfg.Batch = j.sched.batch
	// The model holds a micro-batch: --batch rows (at most the step's).
	j.micro = min(cfg.Batch, j.sched.batch)
	if j.shardIdx >= 0 {
		j.sched.shard = data.ShardLen(nTrain, j.shardIdx, members)
	}
	return j, nil
}

// stepBatch is the rows a rank takes per step: batch, times accumulate
// micro-batches (saturating: newSchedule caps it at a shard).
func stepBatch(batch, accumulate int) int {
	if accumulate <= 1 {
		return batch
	}
	if batch > math.MaxInt/accumulate {
		return math.MaxInt
	}
	return batch * accumulate
}

// newSchedule is the schedule of n training samples on ranks ranks at
// batch per rank. A batch larger than the largest shard takes the whole
// shard at each step (one step per epoch, the same steps as a batch of
// exactly the shard): the schedule keeps that, so that no product of the
// batch and the ranks can overflow however large --batch is (2^62 on 4
// ranks divided by zero; MaxInt ran 0 steps).
func newSchedule(n, ranks, batch int) schedule {
	if n > 0 && ranks > 0 {
		batch = min(batch, data.ShardLen(n, 0, ranks)) // shard 0 is the largest
	}
	return schedule{n: n, ranks: ranks, batch: max(batch, 1)}
}

// trainShard is this rank's strided shard of the training set's rows.
func (j *job) trainShard() []int {
	return data.StridedShard(j.sched.n, j.shardIdx, j.sched.ranks)
}

func (j *job) reports() bool { return j.Comm.Rank() == j.reporter }

// warnf writes one warning line to Warnings.
func (j *job) warnf(format string, args ...any) {
	if j.Warnings != nil {
		fmt.Fprintf(j.Warnings, "dml: rank %d: warning: "+format+"\n", append([]any{j.Comm.Rank()}, args...)...)
	}
}

// printf prints on the reporting rank.
func (j *job) printf(format string, args ...any) {
	if j.reports() && j.Out != nil {
		fmt.Fprintf(j.Out, format, args...)
	}
}

// finish saves the weights (reporting rank) and prints the summary.
func (j *job) finish(res *Result) error {
	cfg := j.cfg
	skipped := ""
	if j.interrupted && cfg.Save != "" {
		cfg.Save, skipped = "", ": --save skipped (the state is in the checkpoint)" // not the final weights
	}
	if j.reports() && cfg.Save != "" {
		if err := model.SaveNPZModel(cfg.Save, res.Arch, res.Params, res.ModelState, j.labels); err != nil {
			return err
		}
	}
	j.printf("done: %d steps in %.1fs (%.0f samples/s), test accuracy %.4f", res.Steps, res.WallSec, res.SamplesPerSec, res.TestAcc)
	if cfg.Save != "" {
		j.printf(", weights saved to %s", cfg.Save)
	}
	j.printf("\n")
	if j.interrupted {
		j.printf("interrupted after step %d%s\n", res.Steps, skipped)
	}
	if p := res.PS; p != nil {
		saved := ""
		if p.PushBytesUnfiltered > 0 && p.PushBytes < p.PushBytesUnfiltered {
			saved = fmt.Sprintf(" (filters saved %.1f%% of push bytes)", 100*(1-float64(p.PushBytes)/float64(p.PushBytesUnfiltered)))
		}
		j.printf("ps: max staleness %d, mean wait %.2fs per worker, %.0f pushes/s, %.0f pulls/s, %.1f MB sent%s\n",
			p.MaxStaleness, p.WaitSec, p.PushesPerSec, p.PullsPerSec, float64(p.BytesSent)/1e6, saved)
	}
	return nil
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
func (j *job) sayClasses(classes int) {
	if d := j.cfg.Data; d.Name == "idx" || d.Name == "libsvm" {
		j.printf("classes: %d, from %s\n", classes, inferred(d, classes, j.labels))
	}
}
