package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/mpi"
	"github.com/dml-project/dml/collectives/stall"
	"github.com/dml-project/dml/internal/regfile"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/model"
)

// intList is a flag holding comma-separated positive integers ("256,128").
type intList struct{ v *[]int }

func (l intList) String() string {
	if l.v == nil {
		return ""
	}
	s := make([]string, len(*l.v))
	for i, x := range *l.v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func (l intList) Set(s string) error {
	*l.v = nil
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("empty list")
	}
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || x <= 0 {
			return fmt.Errorf("%q is not a positive integer", f)
		}
		*l.v = append(*l.v, x)
	}
	return nil
}

// rangeFlag parses "LO,HI" into two ints.
type rangeFlag struct{ lo, hi *int }

func (f rangeFlag) String() string {
	if f.lo == nil {
		return ""
	}
	return fmt.Sprintf("%d,%d", *f.lo, *f.hi)
}

func (f rangeFlag) Set(s string) error {
	a, b, ok := strings.Cut(s, ",")
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("%q: want LOW,HIGH (two integers)", s)
	}
	*f.lo, *f.hi = lo, hi
	return nil
}

// straggleFlag parses "RANK:FACTOR".
type straggleFlag struct{ v *trainer.Straggle }

func (f straggleFlag) String() string {
	if f.v == nil || f.v.Rank < 0 {
		return ""
	}
	return fmt.Sprintf("%d:%g", f.v.Rank, f.v.Factor)
}

func (f straggleFlag) Set(s string) error {
	a, b, ok := strings.Cut(s, ":")
	r, err1 := strconv.Atoi(strings.TrimSpace(a))
	x, err2 := strconv.ParseFloat(strings.TrimSpace(b), 64)
	if !ok || err1 != nil || err2 != nil || r < 0 {
		return fmt.Errorf("%q: want RANK:FACTOR, e.g. 2:3", s)
	}
	*f.v = trainer.Straggle{Rank: r, Factor: x}
	return nil
}

// float32Flag parses a float32.
type float32Flag struct{ v *float32 }

func (f float32Flag) String() string {
	if f.v == nil {
		return ""
	}
	return strconv.FormatFloat(float64(*f.v), 'g', -1, 32)
}

func (f float32Flag) Set(s string) error {
	x, err := strconv.ParseFloat(s, 32)
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("%q is out of range (at most %g in magnitude)", s, math.MaxFloat32)
	}
	if err != nil {
		return fmt.Errorf("%q is not a number", s)
	}
	*f.v = float32(x)
	return nil
}

// commonFlags are the flags train and eval share.
type commonFlags struct {
	backend     string
	precision   string
	prec        kernels.Precision
	kernelsFlag string
	kernels     kernels.KernelChoice
	cudaGraph   string
	blasThreads int
	profFlags   // --profile, --profile-dir, --timeline
	timeout     time.Duration
	stallWarn   time.Duration
	stallAbort  time.Duration // --stall-timeout; 0: --timeout
	liveness    time.Duration // --liveness; 0: the stall rule's
	rank        int           // this rank, once begin ran
	stderr      io.Writer
}

// maxBLASThreads bounds --blas-threads (a typo guard, far above any node).
const maxBLASThreads = 4096

func (c *commonFlags) register(fs *flag.FlagSet, stderr io.Writer) {
	c.stderr = stderr
	fs.StringVar(&c.backend, "backend", kernels.AutoBackend, "compute backend: auto (blas where OpenBLAS loads, else cpu, with a notice), or one this binary was built with: "+strings.Join(kernels.Names(), ", "))
	fs.IntVar(&c.blasThreads, "blas-threads", 1, "threads per rank for the blas backend's matrix products (OPENBLAS_NUM_THREADS, when set, wins); keep ranks × threads ≤ cores")
	fs.StringVar(&c.kernelsFlag, "kernels", kernels.KernelsAuto, "which library serves each op: auto (every library the backend loads by default: cuBLAS for GEMM and cuDNN for convolutions on --backend cuda, oneDNN on --backend blas; dml's own kernels where none does, with a notice), dml (our own kernels only: the reference, bit for bit as before), or libraries by name, comma-separated: cudnn, cublas (cuda), onednn (--backend blas: oneDNN's convolutions, batch norm, pooling, and GEMM from 2^20 multiply-adds; under auto its batch norm and pooling serve, its GEMM on AVX-512 CPUs, and each convolution shape runs on whichever of oneDNN and dml's kernels a start-up measurement finds faster, rank 0's choice for all); each must load, or the run stops")
	fs.StringVar(&c.cudaGraph, "cuda-graph", "auto", "auto: on a GPU, record a training step's forward and backward pass once per batch shape and replay it as one CUDA graph where the step hands nothing to the host half-way (one rank; dpsgd, adpsgd and ps workers; allreduce on several ranks downloads each layer's gradient as it completes and runs op by op); the same weights bit for bit; off: launch every op")
	fs.StringVar(&c.precision, "precision", "fp32", "arithmetic of the matrix products and convolutions: fp32; tf32 (tensor cores on a GPU; backends without them compute fp32); bf16 or fp16: mixed precision as PyTorch's autocast computes it: each product's operands rounded to bfloat16 or half, summed in float32, everything else (stored activations, batch norm, loss, weights, optimizer state, gradient exchange, checkpoints) float32; on a GPU on TF32 tensor cores, on a CPU an emulation (no faster); fp16 turns on --loss-scale dynamic")
	c.profFlags.register(fs)
	fs.DurationVar(&c.timeout, "timeout", collectives.DefaultTimeout, "give up (and abort the job) when a peer does not answer for this long")
	fs.DurationVar(&c.stallWarn, "stall-warn", stall.DefaultWarn, "stall inspector: report an operation (collective or parameter-server request) some ranks have waited in this long, naming the step and the rank waited on; 0: off")
	fs.DurationVar(&c.stallAbort, "stall-timeout", 0, "stall inspector: abort the job with that report after this long (0, or more than --timeout: --timeout)")
	fs.DurationVar(&c.liveness, "liveness", 0, "liveness ring: a rank whose status (sent four times a second) has not come for this long is dead: a stopped process, a host or link gone (0: --timeout + 10 s, so that a stalled wait is named by the stall inspector first; dml launch sets 3s)")
}

// minTimeout is the shortest --timeout and --stall-timeout taken.
const minTimeout = time.Second

// minLiveness is the shortest --liveness: four of the ring's status
// records.
const minLiveness = time.Second

// stallTimeout is how long a stalled operation lasts before the job
// aborts: --stall-timeout, or --timeout when it is 0 or longer.
func (c *commonFlags) stallTimeout() time.Duration {
	if c.stallAbort > 0 && c.stallAbort < c.timeout {
		return c.stallAbort
	}
	return c.timeout
}

func (c *commonFlags) check() error {
	if c.backend != kernels.AutoBackend && !slices.Contains(kernels.Names(), c.backend) {
		hint := ""
		if c.backend == "cuda" {
			hint = " (the CUDA backend is in the binary `make build-cuda` builds: bin/dml-cuda)"
		}
		return usageErr("--backend %q: this binary has %s (or auto)%s", c.backend, strings.Join(kernels.Names(), ", "), hint)
	}
	if c.blasThreads < 1 || c.blasThreads > maxBLASThreads {
		return usageErr("--blas-threads %d: want 1 to %d", c.blasThreads, maxBLASThreads)
	}
	var err error
	if c.prec, err = kernels.ParsePrecision(c.precision); err != nil {
		return usageErr("--precision: %v", err)
	}
	if c.kernels, err = kernels.ParseKernels(c.kernelsFlag); err != nil {
		return usageErr("--kernels %v", err)
	}
	if c.cudaGraph != "auto" && c.cudaGraph != "off" {
		return usageErr("--cuda-graph %q: want auto or off", c.cudaGraph)
	}
	if err := c.profFlags.check(); err != nil {
		return err
	}
	if c.timeout <= 0 {
		return usageErr("--timeout %v must be positive", c.timeout)
	}
	// Below a second a healthy peer (a collective of a large model, a
	// rank still loading its data) would be taken for a dead one.
	if c.timeout < minTimeout {
		return usageErr("--timeout %v: want at least %v (it is how long a rank waits for a peer before giving up on it)", c.timeout, minTimeout)
	}
	if c.stallWarn < 0 {
		return usageErr("--stall-warn %v: want a duration ≥ 0 (0: off)", c.stallWarn)
	}
	if c.liveness < 0 || c.liveness > 0 && c.liveness < minLiveness {
		return usageErr("--liveness %v: want 0 (--timeout + 10 s) or at least %v (the ring's status comes every 250 ms)", c.liveness, minLiveness)
	}
	if c.stallAbort < 0 || (c.stallAbort > 0 && c.stallAbort < minTimeout) {
		return usageErr("--stall-timeout %v: want 0 (--timeout) or at least %v", c.stallAbort, minTimeout)
	}
	return nil
}

// newBackend opens the --backend for this rank (a device backend picks its
// device by the local rank).
// With --backend auto, rank 0 prints the one-line notice when it falls back
// to the pure-Go backend.
func (c *commonFlags) newBackend() (kernels.Backend, error) {
	o := kernels.Options{LocalRank: mpi.LocalRank(), Precision: c.prec, Threads: c.blasThreads, Kernels: c.kernels}
	if c.rank == 0 && c.stderr != nil {
		o.Notice = func(msg string) { fmt.Fprintln(c.stderr, msg) }
	}
	be, err := kernels.Open(c.backend, o)
	// Every rank finds a missing library alike: a usage error (exit 2),
	// with the fix.
	if ue := (*kernels.UnavailableError)(nil); errors.As(err, &ue) {
		return nil, usageErr("--backend %s: %s; to use it: %s", c.backend, ue.Reason, ue.Advice())
	}
	if errors.Is(err, kernels.ErrUnavailable) {
		return nil, usageErr("--backend %s: %v", c.backend, err)
	}
	return be, err
}

// begin applies the flags to a started world — the peer timeout, and
// --profile and --timeline on every rank (profFlags.begin) — and returns
// the function that ends them, to defer with the command's error.
func (c *commonFlags) begin(w collectives.Comm) (func(*error), error) {
	c.rank = w.Rank()
	setTimeout(w, c.timeout)
	if m, ok := w.(*mpi.Comm); ok {
		m.Stall = stall.Policy{Warn: c.stallWarn, Abort: c.stallTimeout()}
		// A wait may last --timeout (longer in the ps stop vote): a rank
		// silent that long is the stall inspector's to name first.
		m.SetQuietLimit(trainer.StopVoteWait(c.timeout))
		if c.liveness > 0 {
			m.SetLiveness(c.liveness)
		}
	}
	return c.profFlags.begin(w)
}

func setTimeout(c collectives.Comm, d time.Duration) {
	if m, ok := c.(*mpi.Comm); ok {
		m.Timeout = d
	}
}

// adamDefaults gives adam and adamw PyTorch's betas and eps where the
// flags leave them, and lars You et al.'s trust coefficient; other
// optimizers ignore the betas and the trust coefficient (zeroed, so that
// their configuration is as it was before these flags).
// lossScaleDefault: --precision fp16 trains with dynamic loss scaling
// unless --loss-scale says otherwise.
func lossScaleDefault(fs *flag.FlagSet, cfg *trainer.Config, precision string) {
	if !given(fs)["loss-scale"] && precision == kernels.FP16.String() {
		cfg.LossScale = "dynamic"
	}
}

// given is the set of flags the command line gave fs (flag.Visit's).
func given(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

func adamDefaults(fs *flag.FlagSet, o *optim.Config) {
	set := given(fs)
	if o.Kind != optim.LARS {
		o.TrustCoef = 0
	} else if !set["trust-coef"] {
		o.TrustCoef = optim.DefaultTrustCoef
	}
	if o.Kind != optim.Adam && o.Kind != optim.AdamW {
		o.Beta1, o.Beta2 = 0, 0
		return
	}
	if !set["beta1"] {
		o.Beta1 = optim.DefaultBeta1
	}
	if !set["beta2"] {
		o.Beta2 = optim.DefaultBeta2
	}
	if !set["eps"] {
		o.Eps = optim.DefaultAdamEps
	}
}

// expectClasses makes a --classes given with idx or libsvm data the class
// count the data must have (trainer.DataConfig.ExpectClasses).
func expectClasses(fs *flag.FlagSet, d *trainer.DataConfig) {
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "classes" && (d.Name == "idx" || d.Name == "libsvm") {
			d.ExpectClasses = d.Classes
		}
	})
}

// fixedClasses refuses --classes where the data set fixes the count
// (Fashion-MNIST, CIFAR-10 and -100, text) and --classes says another:
// it was ignored.
func fixedClasses(fs *flag.FlagSet, d trainer.DataConfig) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "classes" {
			return
		}
		switch d.Name {
		case "fashion-mnist", "cifar10", "cifar100", "cifar100-coarse", "text":
			if _, classes, ok := knownShape(d); ok && classes != d.Classes {
				err = fmt.Errorf("--classes %d: --data %s has %d classes", d.Classes, d.Name, classes)
			}
		}
	})
	return err
}

func registerData(fs *flag.FlagSet, d *trainer.DataConfig) {
	fs.StringVar(&d.Name, "data", d.Name, "data source: fashion-mnist, cifar10 (its binary files in --data-dir), cifar100 (its binary files in --data-dir; its 100 fine labels, or cifar100-coarse: its 20 superclasses), idx, libsvm, text (a file's bytes as tokens, vocabulary 256, in windows of --seq-len + 1: for --model gpt), synthetic, synthetic-images (for CNNs, --shape), or synthetic-sparse (for sparse-logreg)")
	fs.StringVar(&d.Dir, "data-dir", data.DefaultFashionMNISTDir, "Fashion-MNIST's folder (the four IDX .gz files), CIFAR-10's (data_batch_1.bin … data_batch_5.bin, test_batch.bin) or CIFAR-100's (train.bin, test.bin)")
	fs.StringVar(&d.Train, "train", "", "training data: IMAGES,LABELS for idx; FILE for libsvm and text")
	fs.IntVar(&d.SeqLen, "seq-len", 0, fmt.Sprintf("text: tokens per sample (its window holds one more, the last target); the gpt's position table has as many rows (default %d)", trainer.DefaultSeqLen))
	fs.StringVar(&d.Test, "test", "", "test data, as --train (default: hold the last tenth of --train out)")
	fs.IntVar(&d.Samples, "samples", d.Samples, "synthetic: training samples (a quarter as many more are the test set)")
	fs.IntVar(&d.Features, "features", d.Features, "synthetic: features")
	fs.StringVar(&d.Shape, "shape", "", "synthetic-images: each image's CxHxW (default "+trainer.DefaultImageShape+")")
	fs.IntVar(&d.Classes, "classes", d.Classes, "synthetic: classes; idx, libsvm: the number of classes the data must have (checked; default: as its labels say); fashion-mnist, cifar10, cifar100(-coarse), text: must be the data set's own (10, 10, 100 or 20, 256) if given")
	fs.Float64Var(&d.Noise, "noise", d.Noise, "synthetic: noise around the class means (higher is harder)")
	fs.IntVar(&d.NNZ, "nnz", d.NNZ, "synthetic-sparse: nonzero features per row (power-law frequencies)")
	fs.StringVar(&d.Cache, "data-cache", "", "fashion-mnist, idx: keep inflated copies of gzip image files in this folder and read them from there on later runs (dml launch sets it to --checkpoint-dir's data-cache, so that a restart does not inflate the data again)")
	fs.IntVar(&d.MaxFeatures, "max-features", 0, "libsvm: largest feature index accepted (default max(2^20, 64 × the file's bytes), a guard against hostile files)")
}

// trainFlags is everything `dml train` takes beyond the Config and the
// common flags: one definition, used by dml train and by the sweep, which
// parses its --train-args as dml train would.
type trainFlags struct {
	overlap             *overlapFlag
	progress, runReport *string
	ckf                 *checkpointFlags
}

// registerAllTrainFlags registers every flag of `dml train` on fs.
func registerAllTrainFlags(fs *flag.FlagSet, cfg *trainer.Config, cf *commonFlags, stderr io.Writer) trainFlags {
	tf := trainFlags{overlap: registerTrainFlags(fs, cfg), ckf: &checkpointFlags{}}
	tf.progress = fs.String("progress", "auto", "progress bar while an epoch runs: auto (on a terminal, outside mpirun), always, never")
	tf.runReport = fs.String("run-report", "", "each rank writes its CPU time (getrusage), wall time and bytes sent to PREFIX.rank-R.json at its end (dml bench sweep uses it)")
	cf.register(fs, stderr)
	tf.ckf.register(fs)
	return tf
}

// settleConfig finishes a Config parsed from dml train's flags, the same
// way for every command that trains (train, bench consistency): --classes
// as the class count idx and libsvm data must have, the stall settings,
// validation, and --overlap auto by this node's cores
// (TestBenchConsistencySettlesAsTrain).
func settleConfig(cmd string, fs *flag.FlagSet, cfg *trainer.Config, cf *commonFlags, overlap *overlapFlag) error {
	expectClasses(fs, &cfg.Data)
	adamDefaults(fs, &cfg.Opt)
	lossScaleDefault(fs, cfg, cf.precision)
	cfg.Timeout = cf.stallTimeout()
	cfg.StallWarn = cf.stallWarn
	if err := cfg.Validate(); err != nil {
		return usageErr("%s: %s", cmd, flagError(err))
	}
	if err := fixedClasses(fs, cfg.Data); err != nil {
		return usageErr("%s: %v", cmd, err)
	}
	if cfg.SyncBN && !cfg.Model.IsNetwork() {
		return usageErr("%s: --sync-bn: model %v has no batch norm to synchronise", cmd, cfg.Model)
	}
	// A network that cannot take the data is refused before any data is
	// read, where the data's shape is known without reading it.
	if shape, classes, ok := knownShape(cfg.Data); ok && cfg.Model.IsNetwork() {
		c := *cfg
		if c.Model == trainer.GPT {
			// Its blocks are alike: two show what all would take (and a
			// million would take gigabytes to lay out before the memory
			// check, which comes with the ranks).
			c.GPT.Layers = min(c.GPT.OrDefaults().Layers, 2)
		}
		arch, err := trainer.BuildArch(c, shape, classes)
		if err != nil {
			return usageErr("%s: %s", cmd, flagError(err))
		}
		if cfg.SyncBN && len(arch.NormShapes()) == 0 {
			return usageErr("%s: --sync-bn: the network has no batch norm to synchronise", cmd)
		}
	}
	resolveOverlap(overlap, cfg, cf)
	return nil
}

// resolveOverlap turns --overlap auto into true or false by this node's
// cores, ranks and --blas-threads (dml train and bench consistency alike).
func resolveOverlap(overlap *overlapFlag, cfg *trainer.Config, cf *commonFlags) {
	if overlap.mode != "auto" {
		return
	}
	threads := cf.blasThreads
	if n, err := strconv.Atoi(os.Getenv("OPENBLAS_NUM_THREADS")); err == nil && n > 0 {
		threads = n
	}
	cpus := runtime.NumCPU()
	cfg.Overlap = spareCoreForComm(cpus, max(cpus, mpi.OnlineCPUs()), mpi.LocalSize(), threads)
}

// registerTrainFlags registers the flags of a training job (train and
// bench consistency share them). Enumerations parse as they are set, into
// the Config's typed fields.
func registerTrainFlags(fs *flag.FlagSet, cfg *trainer.Config) *overlapFlag {
	overlap := &overlapFlag{v: &cfg.Overlap, mode: "auto"}
	fs.Var(&cfg.Model, "model", "model: mlp, softmax (multinomial regression), logreg (binary), sparse-logreg (with --sync ps), lenet5 (a convolutional network on images: Fashion-MNIST, IDX), resnet20 (ResNet-20 with batch norm, for CIFAR-10's 3×32×32), vgg16 (VGG-16 with batch norm and dropout, torchvision's vgg16_bn keys), resnet50 (ResNet-50's bottleneck blocks: torchvision's resnet50, with CIFAR's stem below 64×64), alexnet (AlexNet with local response normalisation and dropout, for 3×32×32), gpt (nanoGPT's GPT on --data text: --layers, --heads, --embed, --seq-len; nanoGPT's state_dict keys, its head tied to the token embedding), or file (the network --model-file describes)")
	fs.Var(&netFileFlag{set: func(layers []model.LayerSpec) { cfg.Model, cfg.Net = trainer.NetFile, layers }},
		"model-file", "a network in YAML (layers: - {kind: conv, name: conv1, out: 6, kernel: 5, pad: 2} …; see docs/usage.md); sets --model file")
	fs.Var(intList{&cfg.Hidden}, "hidden", "mlp hidden layer sizes, comma-separated")
	fs.IntVar(&cfg.GPT.Layers, "layers", 0, fmt.Sprintf("gpt: transformer blocks (default %d)", trainer.DefaultGPT.Layers))
	fs.IntVar(&cfg.GPT.Heads, "heads", 0, fmt.Sprintf("gpt: attention heads per block, dividing --embed (default %d)", trainer.DefaultGPT.Heads))
	fs.IntVar(&cfg.GPT.Embed, "embed", 0, fmt.Sprintf("gpt: the width of each position's vector (default %d)", trainer.DefaultGPT.Embed))
	fs.StringVar(&cfg.Augment, "augment", "", "augment training images: crop (a random crop of the image padded by 4), flip (mirrored half the time), or crop,flip; the same for every run with the same --seed, on any number of ranks")
	registerData(fs, &cfg.Data)
	fs.IntVar(&cfg.Epochs, "epochs", cfg.Epochs, "passes over the training set")
	fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "mini-batch size per rank (global batch = ranks × batch); a batch above a rank's shard of the training set takes the whole shard, one step per epoch")
	fs.IntVar(&cfg.MaxSteps, "max-steps", cfg.MaxSteps, "stop after this many steps (0: save the initial weights; negative: no limit)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed for weights, shuffling and synthetic data")
	fs.BoolVar(&cfg.Shuffle, "shuffle", cfg.Shuffle, "shuffle each epoch (--shuffle=false for exact reproducibility checks)")
	fs.TextVar(&cfg.Opt.Kind, "optimizer", cfg.Opt.Kind, "optimizer: sgd, momentum, adagrad, adam or adamw (PyTorch's definitions; adamw's weight decay is decoupled), or lars (You et al.'s layer-wise trust ratio on momentum, per weight and bias tensor)")
	fs.Var(float32Flag{&cfg.Opt.LR}, "lr", "learning rate")
	fs.Var(float32Flag{&cfg.Opt.Momentum}, "momentum", "momentum (with --optimizer momentum or lars)")
	fs.Var(float32Flag{&cfg.Opt.WeightDecay}, "weight-decay", "L2 weight decay added to the gradient")
	fs.Var(float32Flag{&cfg.Opt.Eps}, "eps", "adagrad's, adam's and adamw's epsilon (adam, adamw: 1e-8 unless given)")
	fs.Var(float32Flag{&cfg.Opt.Beta1}, "beta1", "adam, adamw: the first moment's decay β1")
	fs.Var(float32Flag{&cfg.Opt.Beta2}, "beta2", "adam, adamw: the second moment's decay β2")
	fs.Var(float32Flag{&cfg.Opt.TrustCoef}, "trust-coef", "lars: the trust coefficient η of each tensor's trust ratio η·‖w‖/(‖g‖ + wd·‖w‖)")
	// Their values apply to their optimizers only (adamDefaults): --help
	// shows those optimizers' defaults, not the zero the others keep.
	fs.Lookup("beta1").DefValue = fmt.Sprint(optim.DefaultBeta1)
	fs.Lookup("beta2").DefValue = fmt.Sprint(optim.DefaultBeta2)
	fs.Lookup("trust-coef").DefValue = fmt.Sprint(optim.DefaultTrustCoef)
	fs.StringVar(&cfg.LRSchedule, "lr-schedule", "", "the learning rate over the epochs after the warm-up: constant (the default), step:E1,E2,…:GAMMA (times GAMMA after each epoch Ei) or cosine (to 0 at the last step)")
	fs.Float64Var(&cfg.WarmupEpochs, "warmup-epochs", 0, "raise the learning rate linearly over this many epochs (fractions too): from 0, or with --lr-scale-ranks from --lr (Goyal et al.'s gradual warm-up)")
	fs.BoolVar(&cfg.LRScaleRanks, "lr-scale-ranks", false, "the linear scaling rule: the learning rate is --lr times the ranks that train")
	fs.Var(float32Flag{&cfg.ClipNorm}, "clip-norm", "scale each step's gradient down to this L2 norm when it is longer (allreduce: the reduced gradient; dpsgd, adpsgd: each rank's own; ps: each worker's own batch's mean); 0: no clipping")
	fs.Var(&cfg.Sync, "sync", trainer.SyncHelp())
	fs.Var(&cfg.Topology, "topology", "dpsgd, adpsgd: the graph models are averaged over: ring, torus (a grid; not a prime rank count; adpsgd: both sides even) or exp (neighbours at distance 2^k)")
	fs.IntVar(&cfg.PS.Servers, "servers", cfg.PS.Servers, "ps: ranks 0..S-1 serve key ranges, the others are workers")
	fs.Var(consistencyFlag{&cfg.PS.Consistency}, "consistency", "ps: bsp, ssp, asp or dssp")
	fs.IntVar(&cfg.PS.Staleness, "staleness", cfg.PS.Staleness, "ps: ssp's bound s (steps the fastest worker may run ahead of the slowest)")
	fs.Var(rangeFlag{&cfg.PS.StalenessLow, &cfg.PS.StalenessHigh}, "staleness-range", "ps: dssp's range sL,sU")
	fs.StringVar(&cfg.PS.Filters, "filters", "", "ps: push filters, comma-separated: sigmod:THRESHOLD (significantly modified), fp16, bf16")
	fs.Var(replicateFlag{&cfg.PS.ReplicateEvery}, "replicate-every", "ps, 2 servers or more: each server sends the previous one a replica of its key range every N rounds (bsp) or N updates (ssp, asp, dssp), so that a dead server's range is in its neighbour's emergency checkpoint; 0: never; auto: every round when the job writes emergency checkpoints (--checkpoint-dir), else never")
	fs.Var(everyFlag{&cfg.PS.FetchEvery}, "fetch-every", "ps, dense models: Downpour SGD's n_fetch: each worker fetches the weights every N steps (and at each epoch's end and checkpoint) and steps its own copy with plain SGD in between; under bsp equal to --push-every")
	fs.Var(everyFlag{&cfg.PS.PushEvery}, "push-every", "ps, dense models: Downpour SGD's n_push: each worker pushes the sum of its gradients every N steps (and at each epoch's end and checkpoint): N times fewer pushes; under bsp equal to --fetch-every")
	fs.StringVar(&cfg.PS.SparseRows, "sparse-rows", trainer.SparseAuto, "ps, dense models: of a table a batch reads only in part (an embedding without a tied head; a position table's rows past --seq-len), pull and push only the rows each batch reaches, the rest of the model whole; the servers step only what is pushed (lazy updates, as PyTorch's SparseAdam): on, off, or auto (on where such tables hold an eighth of the model or more, and not with --fetch-every/--push-every); a checkpoint resumes with the same value")
	fs.Var(straggleFlag{&cfg.Straggle}, "straggle", "slow rank RANK's compute by FACTOR (RANK:FACTOR, a real delay) for experiments")
	fs.Var(algoFlag{&cfg.Allreduce}, "allreduce", "allreduce algorithm: ring, tree, mpi or auto (per bucket, by its size, the rank count and whether MPI's own AllReduce is there: collectives/auto.go)")
	fs.Var(bucketFlag{&cfg.BucketBytes}, "bucket-mb", "allreduce: gradient bucket cap in MiB (whole layers, last layer first, PyTorch DDP-style); 0: one bucket, the whole gradient")
	fs.StringVar(&cfg.Compress, "compress", "none", "allreduce: gradient buckets travel as none (fp32), fp16 or bf16, summed in fp32 (the loss and accuracy stay fp32); auto: fp16 where timing both at start-up finds it 10% faster (a slow link)")
	fs.BoolVar(&cfg.SyncBN, "sync-bn", false, "SyncBatchNorm: batch norm normalises each training batch with the statistics of every training rank's batch (two small AllReduces per batch norm per batch, each micro-batch under --accumulate; under allreduce the backward pass then does not overlap the gradient's AllReduce); allreduce, dpsgd and ps with bsp (their ranks step together), not ssp, asp, dssp, adpsgd or --local-steps")
	fs.Var(countFlag{&cfg.Accumulate, "micro-batches", "a step is one batch"}, "accumulate", "gradient accumulation: a step is N micro-batches of --batch rows per rank, their gradients summed on the rank, then the step's one exchange (AllReduce, push, or averaging) and update (as --batch N times larger, on a model that holds --batch rows); batch norm normalises each micro-batch by itself; checkpoints at step boundaries; not with --local-steps")
	fs.Var(countFlag{&cfg.LocalSteps, "steps", "every step's gradients are summed"}, "local-steps", "allreduce: local SGD: each rank steps its own model H times, then the models are averaged (one AllReduce of the weights every H steps, and at each epoch's end); 1: every step's gradients are summed")
	fs.StringVar(&cfg.LossScale, "loss-scale", "", "allreduce: loss scaling: dynamic (PyTorch's GradScaler: the loss's gradient times S from 65536, the summed gradient divided by S; a step whose gradient overflows is skipped on every rank and S halved, S doubled after 2000 finite steps), dynamic:S0 (starting at S0, a power of two), off, or a static S; default: dynamic with --precision fp16, else off")
	fs.BoolVar(&cfg.ErrorFeedback, "error-feedback", false, "allreduce with --compress: add each rank's rounding residue to its next gradient")
	fs.Var(overlap, "overlap", "allreduce: reduce each bucket while the backward pass of earlier layers runs; dpsgd, adpsgd: exchange models while the gradient is computed: true, false (after it; same weights), or auto (true where this rank has a core to spare for it beside its --blas-threads)")
	fs.IntVar(&cfg.EvalEvery, "eval-every", cfg.EvalEvery, "measure test accuracy every N epochs and after the last (0: only after training)")
	fs.StringVar(&cfg.Metrics, "metrics", "", "write one JSON object per epoch to this file (on the reporting rank: 0, or the first worker with --sync ps)")
	fs.StringVar(&cfg.Save, "save", "", "write the final weights to this .npz file (on the reporting rank)")
	return overlap
}

// replicateFlag parses --replicate-every: auto (PSConfig's 0), 0 (never:
// -1) or a positive count.
type replicateFlag struct{ v *int }

func (f replicateFlag) String() string {
	switch {
	case f.v == nil || *f.v == 0:
		return "auto"
	case *f.v < 0:
		return "0"
	}
	return strconv.Itoa(*f.v)
}

func (f replicateFlag) Set(s string) error {
	if s == "auto" {
		*f.v = 0
		return nil
	}
	n, err := strconv.Atoi(s)
	switch {
	case err != nil || n < 0:
		return fmt.Errorf("%q: want auto, 0 (never) or a positive count", s)
	case n == 0:
		*f.v = -1
	default:
		*f.v = n
	}
	return nil
}

// everyFlag parses --fetch-every and --push-every: a positive count of
// steps, 1 kept as PSConfig's 0 (so that the default leaves the
// configuration hash as it was).
type everyFlag struct{ v *int }

func (f everyFlag) String() string {
	if f.v == nil || *f.v <= 1 {
		return "1"
	}
	return strconv.Itoa(*f.v)
}

func (f everyFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return fmt.Errorf("%q: want a number of steps, at least 1", s)
	}
	if n == 1 {
		n = 0
	}
	*f.v = n
	return nil
}

// consistencyFlag parses --consistency into a ps.Consistency.
type consistencyFlag struct{ v *ps.Consistency }

func (f consistencyFlag) String() string {
	if f.v == nil {
		return ""
	}
	return f.v.String()
}

func (f consistencyFlag) Set(s string) (err error) {
	*f.v, err = ps.ParseConsistency(s)
	return err
}

// overlapFlag parses --overlap: true, false or auto. auto is resolved by
// resolveOverlap once the world (and --blas-threads) is known.
type overlapFlag struct {
	v    *bool
	mode string
}

func (f *overlapFlag) String() string {
	if f == nil || f.mode == "" {
		return "auto"
	}
	return f.mode
}

func (f *overlapFlag) Set(s string) error {
	switch s {
	case "auto":
	case "true", "false":
		*f.v = s == "true"
	default:
		return fmt.Errorf("%q: want true, false or auto", s)
	}
	f.mode = s
	return nil
}

// IsBoolFlag lets a bare --overlap mean true.
func (f *overlapFlag) IsBoolFlag() bool { return true }

// takesSpaced lets "--overlap auto" be written with a space too.
func (f *overlapFlag) takesSpaced(word string) bool { return word == "auto" }

// spareCoreForComm is --overlap auto: overlapping pays where the rank has a
// core for the communication goroutine beside its compute threads. On the
// 2-core machines of docs/results.md's table, with a rank per core, overlap was
// no faster (the communication's copies and reductions need the core the
// BLAS thread holds; see docs/results.md), so it stays off there. cpus is the
// CPUs this process may run on (its affinity), online the node's; the
// node's localRanks ranks are taken to be spread evenly over them.
func spareCoreForComm(cpus, online, localRanks, threads int) bool {
	share := localRanks
	if cpus < online { // bound to a subset: the ranks bound to the same one
		share = max(1, localRanks*cpus/online)
	}
	return cpus >= share*(threads+1)
}

// countFlag parses a count of 1 or more where 1 is Config's 0 (the
// default, which leaves the configuration's fingerprint as it was):
// --local-steps, --accumulate. unit names what is counted, one what 1
// means.
type countFlag struct {
	v         *int
	unit, one string
}

func (f countFlag) String() string {
	if f.v == nil || *f.v <= 1 {
		return "1"
	}
	return strconv.Itoa(*f.v)
}

func (f countFlag) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a whole number of %s", s, f.unit)
	case n < 1:
		return fmt.Errorf("%d: want 1 or more (1: %s)", n, f.one)
	case n == 1:
		n = 0
	}
	*f.v = n
	return nil
}

// bucketFlag parses --bucket-mb (MiB, fractions allowed) into bytes.
type bucketFlag struct{ v *int }

// maxBucketMiB bounds --bucket-mb: far past any model's gradient, far
// below an int's range.
const maxBucketMiB = 1 << 20

func (f bucketFlag) String() string {
	if f.v == nil {
		return ""
	}
	return strconv.FormatFloat(float64(*f.v)/(1<<20), 'g', -1, 64)
}

func (f bucketFlag) Set(s string) error {
	x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	switch {
	case err != nil || math.IsNaN(x):
		return fmt.Errorf("%q is not a number of MiB", s)
	case x < 0 || x > maxBucketMiB:
		return fmt.Errorf("%q: want 0 (one bucket) to %d MiB", s, maxBucketMiB)
	}
	*f.v = int(math.Round(x * (1 << 20)))
	if x > 0 && *f.v < 4 {
		*f.v = 4 // at least one float: a bucket per layer
	}
	return nil
}

// algoFlag parses --allreduce into a collectives.Algorithm.
type algoFlag struct{ v *collectives.Algorithm }

func (f algoFlag) String() string {
	if f.v == nil {
		return ""
	}
	return string(*f.v)
}

func (f algoFlag) Set(s string) (err error) {
	*f.v, err = collectives.ParseAlgorithm(s)
	return err
}

// checkpointFlagNames maps the trainer.Checkpointing fields its messages
// name to the flags that set them.
var checkpointFlagNames = map[string]string{
	"Dir": "--checkpoint-dir", "Every": "--checkpoint-every", "EveryEpochs": "--checkpoint-every", "Keep": "--keep",
	"ResumeFile": "--resume", "ResumeLatest": "--resume",
}

// settingRE finds the settings package trainer's messages name
// ("lower Config.Opt.LR", "Checkpointing.Dir: writing …"): it speaks in
// its Go API's names, and the command line words them as flags.
var settingRE = regexp.MustCompile(`\b(?:Config|Checkpointing)(?:\.[A-Z][A-Za-z]*)+`)

// settingFlag is the flag that sets a setting trainer names.
func settingFlag(setting string) (string, bool) {
	if f, ok := strings.CutPrefix(setting, "Checkpointing."); ok {
		name, ok := checkpointFlagNames[f]
		return name, ok
	}
	f := strings.TrimPrefix(setting, "Config.")
	if f == "Timeout" { // per process: a common flag, not among the Config's
		return "--timeout", true
	}
	name, ok := flagNames()[f]
	return name, ok
}

// worded is an error whose message names flags where trainer's named
// settings; errors.Is and As see the original.
type worded struct {
	error
	msg string
}

func (w worded) Error() string { return w.msg }
func (w worded) Unwrap() error { return w.error }

// wordFlags rewrites the settings err's message names as the flags that
// set them ("lower --lr or check the data").
func wordFlags(err error) error {
	if err == nil {
		return nil
	}
	msg := settingRE.ReplaceAllStringFunc(err.Error(), func(s string) string {
		if f, ok := settingFlag(s); ok {
			return f
		}
		return s
	})
	if msg == err.Error() {
		return err
	}
	return worded{err, msg}
}

// flagWords is a writer of trainer's lines (Trainer.Out, Warnings) that
// words the settings they name as flags, as wordFlags does for errors.
// Trainer writes whole lines (or a progress bar) per call.
type flagWords struct{ w io.Writer }

func (f flagWords) Write(p []byte) (int, error) {
	q := settingRE.ReplaceAllFunc(p, func(s []byte) []byte {
		if name, ok := settingFlag(string(s)); ok {
			return []byte(name)
		}
		return s
	})
	if _, err := f.w.Write(q); err != nil {
		return 0, err
	}
	return len(p), nil
}

// flagError words a configuration error with the flag a person typed:
// "--batch 0 must be greater than 0".
func flagError(err error) string {
	var ce *trainer.ConfigError
	if errors.As(err, &ce) {
		if name, ok := flagNames()[ce.Field]; ok {
			return name + " " + ce.Msg
		}
	}
	var me *trainer.ConfigMismatchError
	if errors.As(err, &me) {
		if name, ok := flagNames()[me.Field]; ok {
			return me.Describe(name)
		}
	}
	return wordFlags(err).Error()
}

// flagErrorWrap turns a configuration error found inside the world into a
// usage error worded with its flag; other errors pass unchanged.
func flagErrorWrap(err error) error {
	if errors.As(err, new(*trainer.ConfigError)) {
		return usageErr("%s", flagError(err))
	}
	return err
}

// netFileFlag is --model-file: it reads the network (readNetFile), hands
// it to set, and keeps the path (checkOverwrites).
type netFileFlag struct {
	set  func([]model.LayerSpec)
	path string
}

func (f *netFileFlag) String() string {
	if f == nil {
		return ""
	}
	return f.path
}

func (f *netFileFlag) Set(path string) error {
	layers, err := readNetFile(path)
	if err != nil {
		return err
	}
	f.set(layers)
	f.path = path
	return nil
}

// modelFilePath is the --model-file fs was given ("" if none).
func modelFilePath(fs *flag.FlagSet) string {
	if f := fs.Lookup("model-file"); f != nil {
		if v, ok := f.Value.(*netFileFlag); ok {
			return v.path
		}
	}
	return ""
}

// readNetFile reads a model file's layers (a regular file of at most
// model.MaxNetFileBytes).
func readNetFile(path string) ([]model.LayerSpec, error) {
	b, err := regfile.ReadFile(path, model.MaxNetFileBytes)
	if err != nil {
		return nil, err
	}
	layers, err := model.ParseNetFile(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return layers, nil
}
