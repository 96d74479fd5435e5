//go:build cuda

package cuda

import (
	"fmt"
	"strings"
	"sync"

	"github.com/dml-project/dml/kernels/ptx"
)

// device is what every backend on one GPU shares: the primary context and
// the kernels, loaded from the embedded PTX once per process.
type device struct {
	Device
	ctx  context
	arch string // the PTX loaded, e.g. "elementwise compute_90, gemm_tf32 compute_80, …"
	k    kernelSet
}

// kernelSet holds every kernel of kernels/cu/ABI.md.
type kernelSet struct {
	fill, scale, axpy, add, relu, reluGrad, addBias function
	sgd, momentum, adagrad                          function
	softmaxXent, sigmoidXent, predict               function
	sumRowsPartial, sumRowsFinal, stats             function
	dotPartial, dotFinal, nonFinite                 function
	gemm                                            map[string]function // by name, for ptx.PickGemm
	hasTF32                                         bool
}

var devices = struct {
	sync.Mutex
	m map[int]*device
}{m: map[int]*device{}}

// openDevice returns device ordinal's shared state, creating it (context,
// module loads, kernel lookup) on first use. Each source's module is the
// PTX of the highest virtual architecture the device runs (ptx.ForDevice:
// compute_90 on Hopper, compute_70 below, the TF32 GEMM's compute_80 from
// 8.0 up); the driver JIT-compiles it for the device.
func openDevice(ordinal int) (*device, error) {
	devices.Lock()
	defer devices.Unlock()
	if d, ok := devices.m[ordinal]; ok {
		return d, nil
	}
	all, err := Devices()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= len(all) {
		return nil, fmt.Errorf("%w: device %d of %d", errNoDevice, ordinal, len(all))
	}
	d := &device{Device: all[ordinal]}
	mods := ptx.ForDevice(d.Major, d.Minor)
	if len(mods) == 0 {
		return nil, fmt.Errorf("%w: device %d (%s) has compute capability %d.%d; the kernels need 7.0",
			errNoDevice, ordinal, d.Name, d.Major, d.Minor)
	}
	if d.ctx, err = primaryContext(ordinal); err != nil {
		return nil, fmt.Errorf("device %d (%s): %w", ordinal, d.Name, err)
	}
	fns := map[string]function{}
	var loaded []string
	for _, pm := range mods {
		m, err := d.ctx.loadModule(pm.PTX)
		if err != nil {
			return nil, fmt.Errorf("device %d (%s, compute capability %d.%d): loading %s.compute_%d.ptx: %w",
				ordinal, d.Name, d.Major, d.Minor, pm.Name, pm.Arch, err)
		}
		for _, name := range pm.Entries() {
			f, ok, err := d.ctx.function(m, name)
			if err != nil || !ok {
				return nil, fmt.Errorf("device %d: %s.compute_%d.ptx: kernel %s: %v", ordinal, pm.Name, pm.Arch, name, err)
			}
			fns[name] = f
		}
		loaded = append(loaded, fmt.Sprintf("%s compute_%d", pm.Name, pm.Arch))
	}
	d.arch = strings.Join(loaded, ", ")
	if err := d.k.lookup(fns, 10*d.Major+d.Minor >= ptx.TF32MinCC); err != nil {
		return nil, fmt.Errorf("device %d (%s): %s: %w", ordinal, d.Name, d.arch, err)
	}
	devices.m[ordinal] = d
	return d, nil
}

// lookup takes every kernel from fns. The TF32 GEMMs are used only when
// the device has TF32 tensor cores (tf32) and the PTX has all four.
func (k *kernelSet) lookup(fns map[string]function, tf32 bool) error {
	for _, e := range []struct {
		f    *function
		name string
	}{
		{&k.fill, "dml_fill"}, {&k.scale, "dml_scale"}, {&k.axpy, "dml_axpy"}, {&k.add, "dml_add"},
		{&k.relu, "dml_relu"}, {&k.reluGrad, "dml_relu_grad"}, {&k.addBias, "dml_add_bias"},
		{&k.sgd, "dml_sgd"}, {&k.momentum, "dml_momentum"}, {&k.adagrad, "dml_adagrad"},
		{&k.softmaxXent, "dml_softmax_xent"}, {&k.sigmoidXent, "dml_sigmoid_xent"}, {&k.predict, "dml_predict"},
		{&k.sumRowsPartial, "dml_sum_rows_partial"}, {&k.sumRowsFinal, "dml_sum_rows_final"}, {&k.stats, "dml_stats"},
		{&k.dotPartial, "dml_dot_partial"}, {&k.dotFinal, "dml_dot_final"}, {&k.nonFinite, "dml_nonfinite"},
	} {
		f, ok := fns[e.name]
		if !ok {
			return fmt.Errorf("no kernel %s", e.name)
		}
		*e.f = f
	}
	// Every name ptx.PickGemm can return: three families × four transposes.
	k.gemm = map[string]function{}
	tf32Found := 0
	for _, ta := range []string{"n", "t"} {
		for _, tb := range []string{"n", "t"} {
			for _, family := range []string{"dml_sgemm_", "dml_sgemm64_"} {
				f, ok := fns[family+ta+tb]
				if !ok {
					return fmt.Errorf("no kernel %s", family+ta+tb)
				}
				k.gemm[family+ta+tb] = f
			}
			if f, ok := fns["dml_sgemm_tf32_"+ta+tb]; ok && tf32 {
				k.gemm["dml_sgemm_tf32_"+ta+tb] = f
				tf32Found++
			}
		}
	}
	k.hasTF32 = tf32Found == 4
	return nil
}
