package main

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/trainer"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/model"
	"github.com/dml-project/dml/trainer/trace"
)

// netWeights builds network kind's architecture for samples of shape with
// the classes its weights' last layer has, and lays the weights out.
func netWeights(kind trainer.ModelKind, layers []model.LayerSpec, arrays map[string]model.Array, shape data.Shape) (model.Arch, []float32, error) {
	cfg := trainer.DefaultConfig()
	cfg.Model, cfg.Net = kind, layers
	if kind == trainer.GPT {
		return gptWeights(cfg, arrays, shape)
	}
	last := ""
	for _, l := range trainer.NetLayers(cfg, 1, shape) {
		if l.Kind == model.KindLinear || l.Kind == model.KindConv {
			last = l.Name + ".weight"
		}
	}
	w, ok := arrays[last]
	if !ok || len(w.Shape) == 0 {
		return model.Arch{}, nil, fmt.Errorf("--weights: no array %s: these are not %v weights", last, kind)
	}
	return buildWeights(cfg, arrays, shape, w.Shape[0])
}

// buildWeights builds cfg's network for samples of shape and classes
// classes and lays the weights out in it.
func buildWeights(cfg trainer.Config, arrays map[string]model.Array, shape data.Shape, classes int) (model.Arch, []float32, error) {
	arch, err := trainer.BuildArch(cfg, shape, classes)
	if err != nil {
		return model.Arch{}, nil, usageErr("eval: %s", flagError(err))
	}
	params, _, err := arch.ParamsFrom(arrays)
	if err != nil {
		return model.Arch{}, nil, fmt.Errorf("--weights: %w", err)
	}
	return arch, params, nil
}

// gptHeads is dml eval's --heads: a GPT's heads, which its arrays'
// shapes do not say.
var gptHeads = trainer.DefaultGPT.Heads

// gptWeights builds a GPT's architecture from its arrays' shapes (the
// width and vocabulary from transformer.wte, the blocks by counting
// them; the heads are --heads) and lays the weights out.
func gptWeights(cfg trainer.Config, arrays map[string]model.Array, shape data.Shape) (model.Arch, []float32, error) {
	wte, ok := arrays["transformer.wte.weight"]
	if !ok || len(wte.Shape) != 2 {
		return model.Arch{}, nil, fmt.Errorf("--weights: no array transformer.wte.weight [vocabulary, width]: these are not gpt weights")
	}
	for k := range arrays {
		if strings.HasPrefix(k, "transformer.h.") && strings.HasSuffix(k, ".ln_1.weight") {
			cfg.GPT.Layers++
		}
	}
	cfg.GPT.Embed, cfg.GPT.Heads = wte.Shape[1], gptHeads
	if wpe, ok := arrays["transformer.wpe.weight"]; ok && len(wpe.Shape) == 2 && wpe.Shape[0] != shape.T {
		return model.Arch{}, nil, usageErr("eval: the weights' position table (transformer.wpe.weight) has %d rows, for sequences of %d tokens, not --seq-len %d: evaluate them with --seq-len %d (the default)", wpe.Shape[0], wpe.Shape[0], shape.T, wpe.Shape[0])
	}
	return buildWeights(cfg, arrays, shape, wte.Shape[0])
}

func cmdEval(args []string, stdout, stderr io.Writer) error {
	e, err := parseEval(args, stdout, stderr)
	if err != nil {
		return err
	}
	sparse, err := e.loadWeights()
	if err != nil {
		return err
	}
	return withWorldBegun(e.cf.timeout, e.cf.begin, func(c collectives.Comm) (err error) {
		var ev trainer.EvalResult
		if sparse {
			ev, err = e.evaluateSparse(c)
		} else {
			ev, err = e.evaluateDense(c)
		}
		if err != nil {
			return err
		}
		if math.IsNaN(ev.Loss) || math.IsInf(ev.Loss, 0) {
			// Finite weights can still overflow on the way (3e38 in a
			// convolution): no accuracy is worth printing then.
			return fmt.Errorf("--weights %s: the loss on the test set is %v: the weights overflow (the largest is %s)", e.weights, ev.Loss, largestWeight(e.arch, e.params))
		}
		if c.Rank() == 0 {
			fmt.Fprintf(stdout, "%s on %d test samples: accuracy %.4f  loss %.4f", e.weights, ev.Samples, ev.Accuracy, ev.Loss)
			if e.dc.Name == "text" {
				fmt.Fprintf(stdout, " (per token: perplexity %.2f)", math.Exp(ev.Loss))
			}
			fmt.Fprintln(stdout)
		}
		return nil
	})
}

// evalJob is dml eval's settings, and the weights once read.
type evalJob struct {
	weights   string
	batch     int
	seed      uint64
	net       trainer.ModelKind // with netSet: a network's, read by name
	netSet    bool
	netLayers []model.LayerSpec // --model-file's
	dc        trainer.DataConfig
	cf        commonFlags

	arch          model.Arch
	params, state []float32
	labels        []int64
	arrays        map[string]model.Array // a network's, until the data's shape builds it
}

// parseEval parses and checks dml eval's flags.
func parseEval(args []string, stdout, stderr io.Writer) (*evalJob, error) {
	e := &evalJob{dc: trainer.DefaultConfig().Data}
	fs := newFlags("eval", `Usage: [mpirun -np N] dml eval --weights FILE [data flags]

Evaluates weights saved by 'dml train --save' (or any .npz with layerK.weight
[out, in] and layerK.bias [out]) on a dataset's test set, and prints the
accuracy and mean loss. Under mpirun the ranks split the test set. Weights
of a network (--model lenet5) are read by its parameters' names (conv1.weight,
…, as PyTorch's state_dict names them), for the data's sample shape.`, stdout)
	fs.StringVar(&e.weights, "weights", "", "the .npz weights file (required)")
	fs.IntVar(&gptHeads, "heads", trainer.DefaultGPT.Heads, "gpt: the attention heads per block the weights were trained with (their shapes give the rest)")
	fs.Func("model", "the network the weights are of: lenet5, resnet20, vgg16, resnet50, alexnet or gpt (with --data text; default: an MLP, softmax or logreg, read from its layerK arrays)", func(v string) error {
		k, err := trainer.ParseModel(v)
		if err == nil && !k.IsPreset() && k != trainer.MLP && k != trainer.Softmax && k != trainer.Logreg {
			err = fmt.Errorf("%s weights are read without --model", v)
		}
		e.net, e.netSet = k, err == nil && k.IsPreset()
		return err
	})
	fs.Var(&netFileFlag{set: func(layers []model.LayerSpec) { e.netLayers, e.net, e.netSet = layers, trainer.NetFile, true }},
		"model-file", "the network (a model file, as dml train's --model-file) the weights are of")
	fs.IntVar(&e.batch, "batch", 1000, "evaluation batch size")
	fs.Uint64Var(&e.seed, "seed", trainer.DefaultConfig().Seed, "seed of the synthetic data (as given to train)")
	registerData(fs, &e.dc)
	e.cf.register(fs, stderr)
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	switch {
	case e.weights == "":
		return nil, usageErr("eval: --weights FILE is required")
	case e.batch <= 0:
		return nil, usageErr("eval: --batch %d must be greater than 0", e.batch)
	}
	if e.dc.Name == "text" && e.dc.Test != "" {
		// Only the test windows are scored: --train is not needed (nor
		// read) then.
		e.dc.Train = e.dc.Test
	}
	if err := e.dc.Validate(); err != nil {
		return nil, usageErr("eval: %s", flagError(err))
	}
	if err := e.cf.check(); err != nil {
		return nil, err
	}
	inputs := append(dataInputs(e.dc), namedPath{"--weights", e.weights}, namedPath{"--model-file", modelFilePath(fs)})
	if err := checkOverwrites("eval", []namedPath{{"--timeline", e.cf.timeline}}, inputs); err != nil {
		return nil, err
	}
	return e, nil
}

// loadWeights reads --weights: an MLP's layers, or a network's arrays by
// name (built once the test set's shape is known), and the labels the
// model was trained on; sparse says the data is read as sparse rows.
func (e *evalJob) loadWeights() (sparse bool, err error) {
	dc := &e.dc
	if e.netSet {
		// A network's architecture needs the data's sample shape: it is
		// built once the test set is open.
		if e.arrays, err = model.LoadNPZArrays(e.weights); err != nil {
			return false, fmt.Errorf("--weights: %w", err)
		}
		if dc.Sparse() {
			return false, usageErr("eval: --model %v takes dense image data, not --data %s", e.net, dc.Name)
		}
		if wpe, ok := e.arrays["transformer.wpe.weight"]; ok && e.net == trainer.GPT && dc.SeqLen == 0 && len(wpe.Shape) == 2 {
			dc.SeqLen = wpe.Shape[0] // the windows the weights were trained on
		}
		if l, ok := e.arrays[model.ClassLabelsKey]; ok {
			for _, f := range l.Exact {
				e.labels = append(e.labels, int64(f))
			}
		}
		e.arch.Sizes = []int{0, 2} // checked below, with the data's shape
	} else if e.arch, e.params, e.labels, err = model.LoadNPZLabels(e.weights); err != nil {
		if strings.Contains(err.Error(), "unexpected array") {
			return false, fmt.Errorf("--weights: %w: weights of a network are read with its --model (lenet5)", err)
		}
		return false, fmt.Errorf("--weights: %w", err)
	}
	// The model's classes stand for the labels it was trained on (saved
	// with the weights when they are not 0 … K-1): a LIBSVM file is read
	// with that mapping, not one inferred from its own labels (a file
	// holding only some of the classes scored 0), and a label the model
	// never saw is an error.
	if dc.Name == "libsvm" {
		if e.labels == nil {
			for k := range max(2, e.arch.Sizes[len(e.arch.Sizes)-1]) {
				e.labels = append(e.labels, int64(k))
			}
		}
		dc.Labels = e.labels
	} else if e.labels != nil {
		return false, usageErr("eval: %s was trained on LIBSVM data whose classes are labels %v: evaluate it on such data (--data libsvm)", e.weights, e.labels)
	}
	// A logistic regression (one layer, one output) reads LIBSVM and
	// synthetic-sparse data as sparse rows, as sparse-logreg trained on it.
	sparse = dc.Sparse() && len(e.arch.Sizes) == 2 && e.arch.Sizes[1] == 1
	if dc.Name == "synthetic-sparse" && !sparse {
		return false, usageErr("eval: --data synthetic-sparse goes with sparse-logreg weights (one layer, one output); these have layers %v", e.arch.Sizes)
	}
	return sparse, nil
}

// evaluateSparse scores a logistic regression on sparse rows, every rank
// its part (collective).
func (e *evalJob) evaluateSparse(c collectives.Comm) (trainer.EvalResult, error) {
	_, test, err := e.dc.LoadSparse(e.seed)
	var fp uint64
	if err == nil {
		fp = trainer.SparseFingerprint(test)
	}
	if err := trainer.AgreeToStart(c, "load its data", err, fp); err != nil {
		return trainer.EvalResult{}, err
	}
	return trainer.EvaluateSparse(c, e.arch, e.params, test)
}

// evaluateDense scores the weights on dense data on the --backend, a
// network built for the data's sample shape, every rank its part
// (collective).
func (e *evalJob) evaluateDense(c collectives.Comm) (trainer.EvalResult, error) {
	mem, err := memoryLimit()
	if err != nil {
		return trainer.EvalResult{}, err
	}
	_, test, err := e.dc.OpenWithin(e.seed, mem.limit, mem.source)
	var fp uint64
	if err == nil {
		fp, err = trainer.SourceFingerprint(test)
	}
	if err == nil && !e.netSet && data.SampleShape(test).T > 0 {
		err = usageErr("eval: %s holds an MLP's weights (layers %v); a token sequence (--data text) is evaluated with the network it was trained as: --model gpt or --model-file", e.weights, e.arch.Sizes)
	}
	if err == nil && e.netSet {
		e.arch, e.params, err = netWeights(e.net, e.netLayers, e.arrays, data.SampleShape(test))
		if err == nil {
			if e.state, err = e.arch.StateFrom(e.arrays); err != nil {
				err = fmt.Errorf("--weights: %w", err)
			}
		}
	}
	if err := trainer.AgreeToStart(c, "load its data", err, fp); err != nil {
		return trainer.EvalResult{}, err
	}
	be, openErr := e.cf.newBackend()
	if err := trainer.AgreeToStart(c, "open its --backend", openErr, 0); err != nil {
		if openErr == nil { // another rank failed: close ours
			be.Close()
		}
		return trainer.EvalResult{}, err
	}
	defer be.Close()
	// --timeline: a span per kernel op (the evaluation has no steps).
	return trainer.Evaluate(c, trace.Backend(be, e.cf.tracer()), e.arch, model.State{Params: e.params, Buffers: e.state}, test, e.batch)
}

// largestWeight names the array holding the weight of largest magnitude,
// and the weight.
func largestWeight(arch model.Arch, params []float32) string {
	name, top := "", float32(-1)
	for _, t := range arch.Tensors() {
		for _, v := range params[t.Off : t.Off+t.Len()] {
			if a := float32(math.Abs(float64(v))); a > top {
				name, top = t.Name, a
			}
		}
	}
	return fmt.Sprintf("%g, in %s", top, name)
}
