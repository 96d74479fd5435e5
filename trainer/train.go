// Package trainer is data-parallel training: models built from the kernels
// op set, datasets sharded by rank, optimizers, the training loop with its
// gradient AllReduce, evaluation, metrics and checkpoints. It talks to other
// ranks only through a collectives.Comm and computes only through a
// kernels.Backend, so it runs the same in one process (tests, on the
// in-process transport) and under mpirun.
package trainer

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer/data"
)

// ErrNonFinite reports a loss or gradient that became NaN or ±Inf.
var ErrNonFinite = errors.New("training diverged")

// ErrUsage marks errors in how the job was started (flags that cannot work
// with this many ranks); every rank finds them alike, and the CLI exits
// with its usage code.
var ErrUsage = errors.New("usage")

// ErrConfigMismatch reports ranks started with different settings.
var ErrConfigMismatch = errors.New("ranks disagree on the configuration")

// Result is what a finished run leaves: the per-epoch figures and the
// final weights (the same on every rank).
type Result struct {
	Arch    Arch
	Params  []float32
	Epochs  []EpochStats // on the reporting rank (rank 0; the first worker under ps)
	Steps   int
	WallSec float64
	TestAcc float64 // at the end of training (NaN if never evaluated)
	// SamplesPerSec is the whole job's training throughput.
	SamplesPerSec float64
	// PS sums up the workers' parameter-server figures (with --sync ps).
	PS *PSStats
}

// Trainer holds what a run needs besides its Config.
type Trainer struct {
	Comm    collectives.Comm
	Backend kernels.Backend
	// Out receives rank 0's epoch lines and summary (nil: quiet).
	Out io.Writer
	// Progress draws a bar on Out while an epoch runs (rank 0, terminals).
	Progress bool
}

// Run loads the data cfg names and trains on it. Every rank of the Comm
// calls it with the same cfg. A rank that fails returns its error without
// telling the others: they fail too once they wait for it longer than the
// transport's timeout (ps: Config.Timeout). The CLI aborts the whole job on
// the first error instead.
func (t *Trainer) Run(cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := CheckSameConfig(t.Comm, cfg); err != nil {
		return nil, err
	}
	if cfg.Model == "sparse-logreg" {
		train, test, err := cfg.Data.LoadSparse(cfg.Seed)
		if err != nil {
			return nil, err
		}
		return t.runSparse(cfg, train, test)
	}
	train, test, err := cfg.Data.Load(cfg.Seed)
	if err != nil {
		return nil, err
	}
	return t.RunWithData(cfg, train, test)
}

// CheckSameConfig all-gathers every rank's Config.Hash and fails on every
// rank, naming the ranks that differ from rank 0, if they are not all equal.
func CheckSameConfig(c collectives.Comm, cfg Config) error {
	h := cfg.Hash()
	mine := []float32{math.Float32frombits(uint32(h >> 32)), math.Float32frombits(uint32(h))}
	all := make([]float32, 2*c.Size())
	if err := collectives.Allgather(c, mine, all); err != nil {
		return fmt.Errorf("comparing configurations: %w", err)
	}
	hashOf := func(r int) uint64 {
		return uint64(math.Float32bits(all[2*r]))<<32 | uint64(math.Float32bits(all[2*r+1]))
	}
	var bad []string
	for r := 1; r < c.Size(); r++ {
		if hashOf(r) != hashOf(0) {
			bad = append(bad, fmt.Sprintf("rank %d (%016x)", r, hashOf(r)))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s started with flags that differ from rank 0's (configuration hash %016x): start every rank with the same command line: %w",
			strings.Join(bad, ", "), hashOf(0), ErrConfigMismatch)
	}
	return nil
}

// BuildArch derives the model's shape from the config and the data.
func BuildArch(cfg Config, features, classes int) (Arch, error) {
	switch cfg.Model {
	case "mlp":
		return NewArch(features, cfg.Hidden, classes, SoftmaxCE)
	case "softmax":
		return NewArch(features, nil, classes, SoftmaxCE)
	case "logreg":
		if classes != 2 {
			return Arch{}, fmt.Errorf("--model logreg is binary, but the data has %d classes (use --model softmax)", classes)
		}
		return NewArch(features, nil, 1, SigmoidCE)
	}
	return Arch{}, fmt.Errorf("unknown model %q", cfg.Model)
}

// run is one rank's state during training.
type run struct {
	*Trainer
	cfg         Config
	model       *Model
	opt         *Optimizer
	ar          *collectives.Allreducer
	train, test *data.Dense // this rank's shards (train is nil on a parameter server)
	testAll     *data.Dense // the whole test set (a ps worker evaluates it alone)
	nTrain      int         // global training set size
	shardRows   int         // this rank's training samples
	shardIdx    int         // which shard: the rank, or the worker's index under ps
	nAll        int         // ranks that train: all under allreduce, the workers under ps
	reporter    int         // the rank that prints epoch lines and writes --metrics
	host        []float32   // gradient + stats on the host, when the backend's buffers are not host memory
	xbuf        []float32
	ybuf        []int32
}

// RunWithData trains on the given full training and test sets; each rank
// keeps only its strided shard of both. Under --sync ps the workers (ranks
// Servers..N-1) share the training set and the servers hold none of it.
func (t *Trainer) RunWithData(cfg Config, train, test *data.Dense) (*Result, error) {
	c := t.Comm
	n, rank := c.Size(), c.Rank()
	members, idx := n, rank
	if cfg.Sync == "ps" {
		if cfg.PS.Servers >= n {
			return nil, fmt.Errorf("--servers %d in a job of %d ranks leaves no worker: %w", cfg.PS.Servers, n, ErrUsage)
		}
		members, idx = n-cfg.PS.Servers, rank-cfg.PS.Servers
	}
	if err := data.CheckShards(train.Rows, members); err != nil {
		return nil, fmt.Errorf("training set: %w", err)
	}
	arch, err := BuildArch(cfg, train.Cols, train.Classes)
	if err != nil {
		return nil, err
	}
	r := &run{Trainer: t, cfg: cfg, nTrain: train.Rows, nAll: members, testAll: test}
	if cfg.Sync == "ps" {
		r.reporter = cfg.PS.Servers
	}
	if idx >= 0 {
		if r.train, err = train.Subset(data.StridedShard(train.Rows, idx, members)); err != nil {
			return nil, err
		}
		r.shardRows, r.shardIdx = r.train.Rows, idx
	}
	if r.test, err = test.Subset(data.StridedShard(test.Rows, rank, n)); err != nil {
		return nil, err
	}
	// Buffers for at most a batch, and never more rows than a shard holds
	// (a --batch far above the data size must not allocate for it).
	rows := max(1, min(cfg.Batch, max(r.shardRows, r.test.Rows)))
	r.model = NewModel(arch, t.Backend, rows)
	np := arch.NumParams()
	if r.opt, err = NewOptimizer(cfg.Opt, t.Backend, np); err != nil {
		return nil, err
	}
	r.ar = collectives.NewAllreducer(c, cfg.Allreduce)
	// Every rank built the same model (CheckSameConfig), so the gradient
	// lengths agree: no need to check them again at every step.
	r.ar.SkipLengthCheck = true
	if _, ok := r.model.Grads.(kernels.HostBuffer); !ok {
		r.host = make([]float32, np+GradStats)
	}
	r.xbuf = make([]float32, rows*arch.Sizes[0])
	r.ybuf = make([]int32, rows)

	// Identical initial weights everywhere: rank 0's, broadcast.
	params := arch.InitParams(cfg.Seed)
	if err := collectives.Broadcast(c, params, 0); err != nil {
		return nil, fmt.Errorf("broadcasting initial weights: %w", err)
	}
	if cfg.Sync == "ps" {
		return r.loopPS(arch, params, &denseStepper{r: r, params: params}, r.evalAll)
	}
	if err := t.Backend.Upload(r.model.Params, params); err != nil {
		return nil, err
	}
	return r.loop()
}

// shuffleSeed is this shard's shuffling seed: --seed mixed with the shard
// index, so that shards are shuffled independently. (With one permutation
// for all shards, samples r and r+N would meet in the same global batch
// every epoch; mixing the index gave 0.875 instead of 0.869 test accuracy on
// the demo run, see the README.)
func (r *run) shuffleSeed() uint64 {
	return r.cfg.Seed ^ uint64(r.shardIdx+1)*0x9E3779B97F4A7C15
}

// evalDue says whether the epoch just trained is measured on the test set:
// every --eval-every epochs, and after the last one.
func (r *run) evalDue(epoch int, last bool) bool {
	c := r.cfg
	return c.EvalEvery > 0 && (epoch%c.EvalEvery == 0 || epoch == c.Epochs || last)
}

func (r *run) rank0() bool { return r.Comm.Rank() == 0 }

func (r *run) reports() bool { return r.Comm.Rank() == r.reporter }

// printf prints on the reporting rank.
func (r *run) printf(format string, args ...any) {
	if r.reports() && r.Out != nil {
		fmt.Fprintf(r.Out, format, args...)
	}
}

// stepsPerEpoch: every rank runs the same number of steps, enough for the
// largest shard; a rank whose shard is used up contributes an empty batch.
func (r *run) stepsPerEpoch() int {
	gb := r.cfg.Batch * r.nAll
	return (r.nTrain + gb - 1) / gb
}

// globalBatch is the number of samples all ranks together use at a step.
func (r *run) globalBatch(step int) int {
	total := 0
	for q := 0; q < r.nAll; q++ {
		total += max(0, min(r.cfg.Batch, data.ShardLen(r.nTrain, q, r.nAll)-step*r.cfg.Batch))
	}
	return total
}

func (r *run) loop() (*Result, error) {
	cfg := r.cfg
	start := time.Now()
	res := &Result{Arch: r.model.Arch, TestAcc: math.NaN()}
	metrics, err := openMetrics(pick(r.reports(), cfg.Metrics))
	if err != nil {
		return nil, err
	}
	defer metrics.close()
	var bar *progress
	if r.Progress && r.reports() && r.Out != nil {
		bar = &progress{w: r.Out}
	}
	r.printf("training %s %v on %d samples (%d ranks × batch %d), %d params, %s, allreduce %s\n",
		cfg.Model, r.model.Arch.Sizes, r.nTrain, r.nAll, cfg.Batch, r.model.Arch.NumParams(), cfg.Opt.Name, cfg.Allreduce)

	steps := r.stepsPerEpoch()
	done := cfg.MaxSteps == 0
	total := 0.0 // samples trained on, all ranks
	for epoch := 1; epoch <= cfg.Epochs && !done; epoch++ {
		t0 := time.Now()
		order := data.EpochOrder(r.shardRows, r.shuffleSeed(), epoch, cfg.Shuffle)
		var lossSum, correct, seen, commSec, stepSec float64
		ran := 0
		for step := 0; step < steps; step++ {
			if cfg.MaxSteps > 0 && res.Steps >= cfg.MaxSteps {
				done = true
				break
			}
			ts := time.Now()
			lo, hi := min(step*cfg.Batch, len(order)), min((step+1)*cfg.Batch, len(order))
			gb := r.globalBatch(step)
			l, c, comm, err := r.step(order[lo:hi], gb)
			if err != nil {
				return nil, fmt.Errorf("epoch %d step %d (global step %d): %w", epoch, step, res.Steps+1, err)
			}
			lossSum += l
			correct += c
			seen += float64(gb)
			total += float64(gb)
			commSec += comm
			stepSec += time.Since(ts).Seconds()
			res.Steps++
			ran++
			bar.update(epoch, step+1, steps, lossSum/seen)
		}
		// Reaching --max-steps on the epoch's last step ends training here,
		// so that this epoch's evaluation sees the final weights.
		done = done || (cfg.MaxSteps > 0 && res.Steps >= cfg.MaxSteps)
		bar.clear()
		if ran == 0 {
			break
		}
		wall := time.Since(t0).Seconds()
		fr := []float32{float32(commSec), float32(stepSec)}
		if err := collectives.Allreduce(r.Comm, fr, collectives.Avg, collectives.Tree); err != nil {
			return nil, err
		}
		st := EpochStats{Epoch: epoch, Steps: ran, Loss: lossSum / seen, TrainAcc: correct / seen,
			SamplesPerSec: seen / wall, CommFraction: float64(fr[0]) / math.Max(float64(fr[1]), 1e-12)}
		if r.evalDue(epoch, done) {
			acc, err := r.evaluate()
			if err != nil {
				return nil, err
			}
			st.TestAcc = &acc
			res.TestAcc = acc
		}
		st.WallSec = time.Since(t0).Seconds()
		res.Epochs = append(res.Epochs, st)
		r.printf("%s\n", st)
		if r.reports() {
			if err := metrics.write(st); err != nil {
				return nil, fmt.Errorf("--metrics: %w", err)
			}
		}
	}
	if math.IsNaN(res.TestAcc) {
		acc, err := r.evaluate()
		if err != nil {
			return nil, err
		}
		res.TestAcc = acc
	}
	res.Params = make([]float32, r.model.Arch.NumParams())
	if err := r.Backend.Download(res.Params, r.model.Params); err != nil {
		return nil, err
	}
	res.WallSec = time.Since(start).Seconds()
	res.SamplesPerSec = total / res.WallSec
	return res, r.finish(res)
}

// finish saves the weights (reporting rank) and prints the summary.
func (r *run) finish(res *Result) error {
	cfg := r.cfg
	if r.reports() && cfg.Save != "" {
		if err := SaveNPZ(cfg.Save, res.Arch, res.Params); err != nil {
			return err
		}
	}
	r.printf("done: %d steps in %.1fs (%.0f samples/s), test accuracy %.4f", res.Steps, res.WallSec, res.SamplesPerSec, res.TestAcc)
	if cfg.Save != "" {
		r.printf(", weights saved to %s", cfg.Save)
	}
	r.printf("\n")
	if p := res.PS; p != nil {
		saved := ""
		if p.PushBytesUnfiltered > 0 && p.PushBytes < p.PushBytesUnfiltered {
			saved = fmt.Sprintf(" (filters saved %.1f%% of push bytes)", 100*(1-float64(p.PushBytes)/float64(p.PushBytesUnfiltered)))
		}
		r.printf("ps: max staleness %d, mean wait %.2fs per worker, %.0f pushes/s, %.0f pulls/s, %.1f MB sent%s\n",
			p.MaxStaleness, p.WaitSec, p.PushesPerSec, p.PullsPerSec, float64(p.BytesSent)/1e6, saved)
	}
	return nil
}

func pick(ok bool, s string) string {
	if ok {
		return s
	}
	return ""
}

// step trains on this rank's samples idx (possibly none) of a global batch
// of gb samples: forward, backward, one fused AllReduce of the gradient and
// the batch statistics, update. It returns the global batch's summed loss
// and correct count and the seconds spent in the AllReduce.
func (r *run) step(idx []int, gb int) (lossSum, correct, commSec float64, err error) {
	m, b := r.model, r.Backend
	np := m.Arch.NumParams()
	// Each rank's gradient is of its summed loss scaled by 1/gb: the sum over
	// ranks is then the gradient of the mean loss over the global batch.
	l, c, err := r.compute(idx, 1/float32(gb))
	if err != nil {
		return 0, 0, 0, err
	}
	buf, err := r.hostGrads()
	if err != nil {
		return 0, 0, 0, err
	}
	buf[np], buf[np+1] = float32(l), float32(c)
	t0 := time.Now()
	if err := r.ar.Allreduce(buf, collectives.Sum); err != nil {
		return 0, 0, 0, err
	}
	commSec = time.Since(t0).Seconds()
	if r.host != nil {
		if err := b.Upload(m.Grads, buf); err != nil {
			return 0, 0, 0, err
		}
	}
	grads := b.View(m.Grads, 0, np)
	lossSum, correct = float64(buf[np]), float64(buf[np+1])
	if err := r.checkFinite(lossSum, grads); err != nil {
		return 0, 0, 0, err
	}
	return lossSum, correct, commSec, r.opt.Update(m.Params, grads)
}

// compute runs forward and backward on this rank's samples idx of the
// training shard, leaving scale × the gradient of their summed loss in
// model.Grads, then sleeps if this rank is the straggler (--straggle).
func (r *run) compute(idx []int, scale float32) (lossSum float64, correct int, err error) {
	t0 := time.Now()
	m, b := r.model, r.Backend
	rows := len(idx)
	x, y := r.xbuf[:rows*m.Arch.Sizes[0]], r.ybuf[:rows]
	if err := r.train.Gather(x, y, idx); err != nil {
		return 0, 0, err
	}
	if err := b.Upload(m.Input(rows), x); err != nil {
		return 0, 0, err
	}
	if lossSum, correct, err = m.Step(y, rows, scale); err != nil {
		return 0, 0, err
	}
	if st := r.cfg.Straggle; st.Rank == r.Comm.Rank() && st.Factor > 1 {
		time.Sleep(time.Duration(float64(time.Since(t0)) * (st.Factor - 1)))
	}
	return lossSum, correct, nil
}

// hostGrads returns the gradient (and its GradStats slots) in host memory:
// the backend's own buffer when it is host memory, else a downloaded copy.
func (r *run) hostGrads() ([]float32, error) {
	if hb, ok := r.model.Grads.(kernels.HostBuffer); ok {
		return hb.Data(), nil
	}
	return r.host, r.Backend.Download(r.host, r.model.Grads)
}

// checkFinite stops training on a NaN/Inf loss or gradient, naming the
// layers whose gradient went bad. Every rank sees the same reduced values,
// so every rank stops at the same step.
func (r *run) checkFinite(lossSum float64, grads kernels.Buffer) error {
	var bad []string
	for k, l := range r.model.Arch.Layers() {
		if r.Backend.NonFinite(r.Backend.View(grads, l.WOff, l.In*l.Out)) >= 0 {
			bad = append(bad, fmt.Sprintf("layer%d.weight", k))
		}
		if r.Backend.NonFinite(r.Backend.View(grads, l.BOff, l.Out)) >= 0 {
			bad = append(bad, fmt.Sprintf("layer%d.bias", k))
		}
	}
	switch {
	case len(bad) > 0:
		return fmt.Errorf("non-finite gradient in %s (loss %v): lower --lr or check the data: %w",
			strings.Join(bad, ", "), lossSum, ErrNonFinite)
	case !finite(lossSum):
		return fmt.Errorf("loss is %v: lower --lr or check the data: %w", lossSum, ErrNonFinite)
	}
	return nil
}

// evaluate returns the test accuracy over every rank's test shard.
func (r *run) evaluate() (float64, error) {
	local, err := evaluateLocal(r.model, r.test, r.xbuf, r.ybuf)
	if err != nil {
		return 0, err
	}
	ev, err := local.sum(r.Comm)
	return ev.Accuracy, err
}
