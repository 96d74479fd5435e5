package engine

import (
	"errors"
	"fmt"
	"os"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/trainer/config"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/model"
)

func (t *Trainer) refuse(what string, need float64, fix string) error {
	return CheckMemory(t.MemoryLimit, t.memorySource(), what, need, fix)
}

// memoryCheck is refuse with its fix given, for the data loaders.
func (t *Trainer) memoryCheck(fix string) config.MemoryCheck {
	return func(what string, need float64) error { return t.refuse(what, need, fix) }
}

func (t *Trainer) memorySource() string {
	if t.MemorySource != "" {
		return t.MemorySource
	}
	return "Trainer.MemoryLimit"
}

// checkDataMemory refuses synthetic data that would not fit, with the
// model trained on it, before the data are generated (files are bounded by
// their size as they are read, and the model checked once they are).
func (t *Trainer) checkDataMemory(cfg Config) error {
	d := cfg.Data
	rows := float64(d.Samples) + float64(max(1, d.Samples/4))
	switch d.Name {
	case "synthetic":
		// The whole set, then the training and test sets copied out of it;
		// float64 class means.
		need := 2*rows*(4*float64(d.Features)+4) + 8*float64(d.Classes)*float64(d.Features)
		what := fmt.Sprintf("synthetic data of %d samples × %d features", d.Samples, d.Features)
		if arch, err := BuildArch(cfg, data.Shape{C: d.Features, H: 1, W: 1}, d.Classes); err == nil {
			m, _ := t.modelNeed(cfg, arch, d.Samples, max(1, d.Samples/4))
			need += m
			what += fmt.Sprintf(" and a model of %d parameters", arch.NumParams())
		}
		return t.refuse(what, need, "lower Config.Data.Samples, Config.Data.Features, Config.Data.Classes or Config.Hidden")
	case "synthetic-images":
		shape, err := d.ImageShape()
		if err != nil {
			return nil // Validate says so
		}
		// The whole set and its copies, and float64 class patterns.
		need := 2*rows*(4*float64(shape.Size())+4) + 8*float64(d.Classes)*float64(shape.Size())
		what := fmt.Sprintf("synthetic-images data of %d samples of %v", d.Samples, shape)
		if arch, err := BuildArch(cfg, shape, d.Classes); err == nil {
			m, _ := t.modelNeed(cfg, arch, d.Samples, max(1, d.Samples/4))
			need += m
			what += fmt.Sprintf(" and a model of %d parameters", arch.NumParams())
		}
		return t.refuse(what, need, "lower Config.Batch (a network's activations grow with it), Config.Data.Samples or the image shape (Config.Data.Shape)")
	case "text":
		if cfg.Model == GPT {
			return t.checkGPTMemory(cfg)
		}
	case "synthetic-sparse":
		need := 2 * rows * (8*float64(d.NNZ) + 12)
		return t.refuse(fmt.Sprintf("synthetic-sparse data of %d samples × %d nonzeros", d.Samples, d.NNZ), need, "lower Config.Data.Samples or Config.Data.NNZ")
	}
	return nil
}

// checkGPTMemory refuses a gpt too large for this rank's memory before
// its network is built (a million blocks would take gigabytes to lay out
// before the check after the data are read could refuse them): its need
// is modelNeed's, exactly, taken from the networks of one and two blocks
// (each block adds the same), on the windows the text files hold.
func (t *Trainer) checkGPTMemory(cfg Config) error {
	g := cfg.GPT.OrDefaults()
	windows := func(path string) int {
		if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
			return data.TextWindowCount(int(fi.Size()), cfg.Data.EffectiveSeqLen())
		}
		return 0
	}
	nTrain, nTest := windows(cfg.Data.Train), windows(cfg.Data.Test)
	if cfg.Data.Test == "" {
		nTrain, nTest = config.HoldOutRows(nTrain)
	}
	need := func(layers int) (float64, model.Arch, error) {
		c := cfg
		c.GPT.Layers = layers
		a, err := BuildArch(c, cfg.Data.TextShape(), data.TextVocab)
		if err != nil {
			return 0, a, err
		}
		n, _ := t.modelNeed(c, a, nTrain, nTest)
		return n, a, nil
	}
	one, a1, err := need(1)
	if err != nil {
		return nil // the check after the data are read says why
	}
	two, a2, err := need(2)
	if err != nil {
		return nil
	}
	total := one + float64(g.Layers-1)*(two-one)
	params := g.Params(cfg.Data.EffectiveSeqLen())
	what := fmt.Sprintf("gpt of %d blocks %d wide (%.3g parameters) on %d tokens per sample", g.Layers, g.Embed, params, cfg.Data.EffectiveSeqLen())
	return t.refuse(what, total, sequenceHint(float64(a2.NumParams()-a1.NumParams()), two-one))
}

// sequenceHint is the fix for a sequence network that does not fit, given
// the parameters of (a part of) it and the bytes that part needs: fewer
// or narrower blocks where the weights and their copies (up to five, 4
// bytes each) take half of it or more, a smaller batch or shorter
// sequences where the activations do.
func sequenceHint(params, need float64) string {
	if 4*5*params >= need/2 {
		return "lower Config.GPT.Layers or Config.GPT.Embed, or run fewer ranks per node"
	}
	return "lower Config.Batch or Config.Data.SeqLen, or run fewer ranks per node"
}

// modelBytes is a lower bound of the host memory a rank allocates for a
// dense model: the parameters three times over (initial weights, the
// gradient's host copy, the final weights), with a host backend twice more
// (weights and gradient) plus the optimizer's state, and a batch of rows
// samples: its input staged on the host, and with a host backend the
// input again and each layer's output and output gradient. A device
// backend's own buffers are its to refuse (kernels.ErrDevice).
func modelBytes(arch model.Arch, opt optim.Kind, rows int, device bool) float64 {
	p := float64(arch.NumParams())
	acts := float64(arch.Sizes[0] + 1)
	copies := 3.0
	if !device {
		copies += 2
		if opt != optim.SGD {
			copies++
		}
		acts = 2*acts + float64(arch.ActivationFloats()) + float64(arch.Sizes[len(arch.Sizes)-1])
	}
	return 4 * (copies*p + float64(rows)*acts + float64(arch.ScratchFloats(rows)+arch.KeptColumns(rows)))
}

// modelNeed is modelBytes for cfg's model on nTrain and nTest samples:
// the batch a rank's buffers hold (runDense: at most a shard), and that
// batch.
func (t *Trainer) modelNeed(cfg Config, arch model.Arch, nTrain, nTest int) (float64, int) {
	members := t.Comm.Size() - UnitOf(cfg.Sync).Servers(cfg)
	shard := data.ShardLen(max(nTrain, 0), 0, max(1, members))
	testShard := (nTest + t.Comm.Size() - 1) / t.Comm.Size()
	rows := max(1, min(cfg.Batch, max(shard, testShard)))
	// Only device backends hand out pinned host memory (HostAllocator).
	_, device := t.Backend.(kernels.HostAllocator)
	need := modelBytes(arch, cfg.Opt.Kind, rows, device)
	if cfg.Accumulate > 1 && !device { // the earlier micro-batches' gradient (model.Accumulator; a ps server has none, but is counted alike)
		need += 4 * float64(arch.NumParams()+model.GradStats)
	}
	return need, rows
}

// checkModelMemory builds the dense model's architecture for the loaded
// data and refuses it, before anything is allocated for it, where it and
// the data cannot fit in this rank's memory.
func (t *Trainer) checkModelMemory(cfg Config, train, test data.DenseSource) error {
	trainRows, cols, classes := train.Shape()
	testRows, _, _ := test.Shape()
	arch, err := BuildArch(cfg, data.SampleShape(train), classes)
	if errors.Is(err, model.ErrTooLarge) {
		return config.TooBig("%v: shrink Config.Hidden", err)
	}
	if err != nil {
		return err
	}
	need, rows := t.modelNeed(cfg, arch, trainRows, testRows)
	// The whole sets: an upper bound where a rank reads only its shard
	// (data.IDXSource).
	need += 4 * float64(trainRows+testRows) * float64(cols+1)
	what := fmt.Sprintf("model %s (%d parameters, %v, batch %d) with its data", arch.Describe(), arch.NumParams(), cfg.Opt.Kind, rows)
	hint := "shrink Config.Hidden or Config.Batch, or run fewer ranks per node"
	switch {
	case arch.Loss == model.TokenCE: // attention keeps batch × heads × seq² per block
		hint = sequenceHint(float64(arch.NumParams()), need)
	case cfg.Model.IsNetwork():
		hint = "lower Config.Batch, or run fewer ranks per node"
	}
	return t.refuse(what, need, hint)
}
