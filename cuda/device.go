//go:build cuda

package cuda

import (
	"fmt"
	"strings"
	"sync"

	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/kernels/ptx"
)

// device is what every backend on one GPU shares: the primary context and
// the kernels, loaded from the embedded PTX once per process.
type device struct {
	Device
	ctx  context
	arch string // the PTX loaded, e.g. "elementwise compute_90, gemm compute_90, …"
	k    kernelSet
	// tf32 holds the four TF32 GEMMs by name once a TF32 backend asked for
	// them (nil before; never changed after, so backends read it freely);
	// tf32Tried says the load was attempted.
	tf32      map[string]function
	tf32Tried bool
	mods      []ptx.Module
}

// kernelSet holds every kernel of kernels/cu/ABI.md but the TF32 GEMMs.
type kernelSet struct {
	fill, scale, axpy, add, relu, reluGrad, addBias function
	round                                           function
	sumsq2Partial, larsRate                         function
	// rules is each optimizer rule's kernel, by optim.Kind
	// (optim.Kind.Kernel: several kinds may share one).
	rules                               []function
	softmaxXent, sigmoidXent, predict   function
	sumRowsPartial, sumRowsFinal, stats function
	dotPartial, dotFinal, nonFinite     function
	// module conv (ConvOps, NormOps)
	im2col, col2im, transpose01                function
	maxPool, maxPoolGrad, avgPool, avgPoolGrad function
	maxPoolGradDisjoint                        function
	maxPoolPad, maxPoolPadGrad                 function
	lrn, lrnGrad                               function
	bnSumsFinish, bnFinishSums, bnGradInput    function
	bnPartial, bnFinish, bnCoef, bnApply       function
	bnGradPartial, bnGradFinish, bnGradApply   function
	// module transformer (TransformerOps)
	gelu, geluGrad                            function
	layerNorm, layerNormGradRows              function
	layerNormColsPartial, layerNormColsFinish function
	dropout                                   function
	// module transformer, too (SequenceOps)
	embedding, embeddingGrad         function
	embeddingCount, embeddingOffsets function
	embeddingPlace                   function
	attention, attentionGradDot      function
	attentionGradKV, attentionGradQ  function
	attentionSoftmax, attentionDS    function
	gemm                             map[string]function // by name, for ptx.PickGemm
}

// tf32Module is the source whose module holds the TF32 GEMMs; it is loaded
// only for a backend opened with Precision TF32 (its JIT compilation takes
// about a second on a fresh machine).
const tf32Module = "gemm_tf32"

var devices = struct {
	sync.Mutex
	m map[int]*device
}{m: map[int]*device{}}

// openDevice returns device ordinal's shared state, creating it (context,
// module loads, kernel lookup) on first use, and loading the TF32 GEMMs
// the first time tf32 is asked for. Each source's module is the PTX of the
// highest virtual architecture the device runs (ptx.ForDevice: compute_90
// on Hopper, compute_70 below, the TF32 GEMM's compute_80 from 8.0 up);
// the driver JIT-compiles the modules, in parallel, for the device.
//
// It returns the TF32 GEMMs by name when tf32 is asked for and the device
// has them, else nil.
func openDevice(ordinal int, tf32 bool) (*device, map[string]function, error) {
	devices.Lock()
	defer devices.Unlock()
	d, ok := devices.m[ordinal]
	if !ok {
		var err error
		if d, err = newDevice(ordinal); err != nil {
			return nil, nil, err
		}
		devices.m[ordinal] = d
	}
	if !tf32 {
		return d, nil, nil
	}
	if !d.tf32Tried {
		d.tf32Tried = true
		if err := d.loadTF32(); err != nil {
			return nil, nil, err
		}
	}
	return d, d.tf32, nil
}

func newDevice(ordinal int) (*device, error) {
	all, err := Devices()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= len(all) {
		return nil, fmt.Errorf("%w: device %d of %d", errNoDevice, ordinal, len(all))
	}
	d := &device{Device: all[ordinal], mods: ptx.ForDevice(all[ordinal].Major, all[ordinal].Minor)}
	if len(d.mods) == 0 {
		return nil, fmt.Errorf("%w: device %d (%s) has compute capability %d.%d; the kernels need 7.0",
			errNoDevice, ordinal, d.Name, d.Major, d.Minor)
	}
	if d.ctx, err = primaryContext(ordinal); err != nil {
		return nil, fmt.Errorf("device %d (%s): %w", ordinal, d.Name, err)
	}
	var base []ptx.Module
	for _, pm := range d.mods {
		if pm.Name != tf32Module {
			base = append(base, pm)
		}
	}
	fns, desc, err := d.load(base)
	if err != nil {
		return nil, err
	}
	d.arch = desc
	if err := d.k.lookup(fns); err != nil {
		return nil, fmt.Errorf("device %d (%s): %s: %w", ordinal, d.Name, d.arch, err)
	}
	return d, nil
}

// load JIT-compiles mods concurrently and returns their kernels by name,
// and a description of what was loaded.
func (d *device) load(mods []ptx.Module) (map[string]function, string, error) {
	loaded := make([]module, len(mods))
	errs := make([]error, len(mods))
	var wg sync.WaitGroup
	for i, pm := range mods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loaded[i], errs[i] = d.ctx.loadModule(pm.PTX)
		}()
	}
	wg.Wait()
	fns := map[string]function{}
	var desc []string
	for i, pm := range mods {
		if errs[i] != nil {
			return nil, "", fmt.Errorf("device %d (%s, compute capability %d.%d): loading %s.compute_%d.ptx: %w",
				d.Ordinal, d.Name, d.Major, d.Minor, pm.Name, pm.Arch, errs[i])
		}
		for _, name := range pm.Entries() {
			f, ok, err := d.ctx.function(loaded[i], name)
			if err != nil || !ok {
				return nil, "", fmt.Errorf("device %d: %s.compute_%d.ptx: kernel %s: %v", d.Ordinal, pm.Name, pm.Arch, name, err)
			}
			fns[name] = f
		}
		desc = append(desc, fmt.Sprintf("%s compute_%d", pm.Name, pm.Arch))
	}
	return fns, strings.Join(desc, ", "), nil
}

// loadTF32 loads the TF32 GEMM module where the device has TF32 tensor
// cores and the PTX has one; d.tf32 stays nil otherwise (FP32 is used).
func (d *device) loadTF32() error {
	if 10*d.Major+d.Minor < ptx.TF32MinCC {
		return nil
	}
	for _, pm := range d.mods {
		if pm.Name != tf32Module {
			continue
		}
		fns, _, err := d.load([]ptx.Module{pm})
		if err != nil {
			return err
		}
		m := map[string]function{}
		for _, ta := range []string{"n", "t"} {
			for _, tb := range []string{"n", "t"} {
				name := "dml_sgemm_tf32_" + ta + tb
				f, ok := fns[name]
				if !ok {
					return fmt.Errorf("device %d: %s.compute_%d.ptx has no kernel %s", d.Ordinal, pm.Name, pm.Arch, name)
				}
				m[name] = f
			}
		}
		d.tf32 = m
	}
	return nil
}

// lookup takes every kernel but the TF32 GEMMs from fns.
func (k *kernelSet) lookup(fns map[string]function) error {
	for _, e := range []struct {
		f    *function
		name string
	}{
		{&k.fill, "dml_fill"}, {&k.scale, "dml_scale"}, {&k.round, "dml_round"}, {&k.axpy, "dml_axpy"}, {&k.add, "dml_add"},
		{&k.relu, "dml_relu"}, {&k.reluGrad, "dml_relu_grad"}, {&k.addBias, "dml_add_bias"},
		{&k.sumsq2Partial, "dml_sumsq2_partial"}, {&k.larsRate, "dml_lars_rate"},
		{&k.softmaxXent, "dml_softmax_xent"}, {&k.sigmoidXent, "dml_sigmoid_xent"}, {&k.predict, "dml_predict"},
		{&k.sumRowsPartial, "dml_sum_rows_partial"}, {&k.sumRowsFinal, "dml_sum_rows_final"}, {&k.stats, "dml_stats"},
		{&k.dotPartial, "dml_dot_partial"}, {&k.dotFinal, "dml_dot_final"}, {&k.nonFinite, "dml_nonfinite"},
		{&k.im2col, "dml_im2col"}, {&k.col2im, "dml_col2im"}, {&k.transpose01, "dml_transpose01"}, {&k.maxPool, "dml_maxpool"}, {&k.maxPoolGrad, "dml_maxpool_grad"},
		{&k.maxPoolGradDisjoint, "dml_maxpool_grad_disjoint"},
		{&k.avgPool, "dml_avgpool"}, {&k.avgPoolGrad, "dml_avgpool_grad"},
		{&k.maxPoolPad, "dml_maxpool_pad"}, {&k.maxPoolPadGrad, "dml_maxpool_pad_grad"},
		{&k.lrn, "dml_lrn"}, {&k.lrnGrad, "dml_lrn_grad"},
		{&k.bnSumsFinish, "dml_bn_sums_finish"}, {&k.bnFinishSums, "dml_bn_finish_sums"}, {&k.bnGradInput, "dml_bn_grad_input"},
		{&k.bnPartial, "dml_bn_partial"}, {&k.bnFinish, "dml_bn_finish"}, {&k.bnCoef, "dml_bn_coef"}, {&k.bnApply, "dml_bn_apply"},
		{&k.bnGradPartial, "dml_bn_grad_partial"}, {&k.bnGradFinish, "dml_bn_grad_finish"}, {&k.bnGradApply, "dml_bn_grad_apply"},
		{&k.gelu, "dml_gelu"}, {&k.geluGrad, "dml_gelu_grad"}, {&k.layerNorm, "dml_layer_norm"},
		{&k.layerNormGradRows, "dml_layer_norm_grad_rows"}, {&k.layerNormColsPartial, "dml_layer_norm_grad_cols_partial"},
		{&k.layerNormColsFinish, "dml_layer_norm_grad_cols_finish"}, {&k.dropout, "dml_dropout"},
		{&k.embedding, "dml_embedding"}, {&k.embeddingGrad, "dml_embedding_grad"}, {&k.attention, "dml_attention"},
		{&k.embeddingCount, "dml_embedding_count"}, {&k.embeddingOffsets, "dml_embedding_offsets"},
		{&k.embeddingPlace, "dml_embedding_place"},
		{&k.attentionGradDot, "dml_attention_grad_dot"}, {&k.attentionGradKV, "dml_attention_grad_kv"}, {&k.attentionGradQ, "dml_attention_grad_q"},
		{&k.attentionSoftmax, "dml_attention_softmax"}, {&k.attentionDS, "dml_attention_ds"},
	} {
		f, ok := fns[e.name]
		if !ok {
			return fmt.Errorf("no kernel %s", e.name)
		}
		*e.f = f
	}
	k.rules = make([]function, len(optim.Kinds))
	for _, r := range optim.Kinds {
		f, ok := fns[r.Kernel()]
		if !ok {
			return fmt.Errorf("no kernel %s (optimizer %v)", r.Kernel(), r)
		}
		k.rules[r] = f
	}
	// Every FP32 name ptx.PickGemm can return: each family × four
	// transposes.
	k.gemm = map[string]function{}
	for _, ta := range []string{"n", "t"} {
		for _, tb := range []string{"n", "t"} {
			for _, family := range ptx.GemmFamilies {
				f, ok := fns[family+ta+tb]
				if !ok {
					return fmt.Errorf("no kernel %s", family+ta+tb)
				}
				k.gemm[family+ta+tb] = f
			}
		}
	}
	return nil
}
