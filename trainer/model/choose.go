package model

import (
	"fmt"
	"time"

	"github.com/dml-project/dml/kernels"
)

// ConvTiming is one convolution shape's measurement by ChooseConvs: the
// best of its rounds of forward and backward pass, on dml's own kernels
// and on the library.
type ConvTiming struct {
	// Layers are the conv layers of this shape, by name.
	Layers   []string
	Own, Lib time.Duration
	// FLOPs is the three products' multiply-adds ×2 (two for the
	// network's first layer, which takes no input gradient).
	FLOPs float64
}

// chooseRounds is how often each shape runs each way (the best counts).
const chooseRounds = 3

// ChooseConvs measures, where the backend's library convolutions are on
// trial (kernels.OnTrial: --kernels auto), each convolution shape of the
// network at maxRows rows on dml's own kernels and on the library
// (TimeConvs), and chooses the faster per shape. Off trial it returns nil
// (New's default). The times differ from run to run, and so may the
// choice: a run that must repeat itself bit for bit names its kernels
// (--kernels dml or onednn).
func ChooseConvs(arch Arch, b kernels.Backend, maxRows int) (ConvChoice, []ConvTiming, error) {
	if _, ok := kernels.WholeConvOf(b); !ok || !kernels.OnTrial(b) {
		return nil, nil, nil
	}
	timings, ofConv, err := TimeConvs(arch, b, b, maxRows, chooseRounds)
	if err != nil || len(ofConv) == 0 {
		return nil, nil, err
	}
	choice := make(ConvChoice, len(ofConv))
	for c, j := range ofConv {
		choice[c] = timings[j].Lib < timings[j].Own
	}
	return choice, timings, nil
}

// TimeConvs times each convolution shape of the network at maxRows rows
// — its forward pass, weight and input gradient, best of rounds — with
// dml's own kernels on own and with the library on lib (own and lib may
// be one backend; lib must have whole convolutions), each after a whole
// step, so that buffers lie as in training (the library's layouts
// included). The rounds alternate between the two. It returns a timing
// per shape and, for each conv layer in order, its shape's index.
func TimeConvs(arch Arch, own, lib kernels.Backend, maxRows, rounds int) ([]ConvTiming, []int, error) {
	if _, ok := kernels.WholeConvOf(lib); !ok {
		return nil, nil, fmt.Errorf("backend %s has no library convolutions", lib.Name())
	}
	nodes, layers := arch.mustNodes(), arch.Layers()
	type shapeKey struct {
		in       Shape
		out, k   int
		s, p     int
		bias, dx bool
	}
	groups, ofConv := groupNodes(nodes, KindConv, func(n node) shapeKey {
		return shapeKey{n.in, n.Out, n.Kernel, n.Stride, n.Pad, layers[n.param].HasBias(), n.from >= 0}
	})
	first := make([]int, len(groups)) // the conv node of each shape timed
	timings := make([]ConvTiming, len(groups))
	for j, g := range groups {
		first[j] = g[0]
		timings[j] = ConvTiming{Layers: nodeNames(nodes, g), Own: maxDuration, Lib: maxDuration, FLOPs: nodes[g[0]].convFLOPs(maxRows)}
	}
	if len(first) == 0 {
		return nil, nil, nil
	}
	var models [2]*Model
	defer func() {
		for _, m := range models {
			if m != nil {
				m.Free()
			}
		}
	}()
	for k, b := range []kernels.Backend{own, lib} {
		choice := make(ConvChoice, len(ofConv))
		for c := range choice {
			choice[c] = k == 1
		}
		m, err := NewChosen(arch, b, maxRows, choice)
		if err != nil {
			return nil, nil, err
		}
		models[k] = m
		if err := m.warm(maxRows); err != nil {
			return nil, nil, fmt.Errorf("measuring the convolutions: %w", err)
		}
	}
	for range rounds {
		for j, i := range first {
			for k, m := range models {
				d, err := m.timeConv(i)
				if err != nil {
					return nil, nil, fmt.Errorf("measuring the convolutions: %w", err)
				}
				if k == 0 {
					timings[j].Own = min(timings[j].Own, d)
				} else {
					timings[j].Lib = min(timings[j].Lib, d)
				}
			}
		}
	}
	return timings, ofConv, nil
}

const maxDuration = time.Duration(1<<63 - 1)

// convFLOPs is conv node n's multiply-adds ×2 for rows samples: its
// forward pass, weight gradient and (but for the network's input) input
// gradient.
func (n node) convFLOPs(rows int) float64 {
	f := 2 * float64(rows) * float64(n.Out*n.out.H*n.out.W) * float64(n.in.C*n.Kernel*n.Kernel)
	if n.from >= 0 {
		return 3 * f
	}
	return 2 * f
}

// warm runs one step on a batch of zeros (class 0).
func (m *Model) warm(rows int) error {
	if err := m.Upload(make([]float32, rows*(m.Arch.Sizes[0]+1)), rows); err != nil {
		return err
	}
	return m.Step(1/float32(rows), nil)
}

// timeConv runs conv node i's forward pass and its gradients once, and
// says how long they took.
func (m *Model) timeConv(i int) (time.Duration, error) {
	n, rows := m.nodes[i], m.rows
	x, y := m.input(i), m.view(m.acts[i], rows, n.out.Size())
	dy := m.view(m.dacts[i], rows, n.out.Size())
	var dx kernels.Buffer
	if n.from >= 0 {
		dx = m.view(m.dacts[n.from], rows, m.nodes[n.from].out.Size())
	}
	t0 := time.Now()
	err := m.convForward(i, n, x, y)
	if err == nil {
		err = m.convBackward(i, n, x, dy, dx)
	}
	if err == nil {
		err = m.B.Sync()
	}
	return time.Since(t0), err
}

// ConvLayers names the network's convolution layers in order: what a
// ConvChoice indexes.
func (a Arch) ConvLayers() []string {
	var names []string
	for _, n := range a.mustNodes() {
		if n.Kind == KindConv {
			names = append(names, n.Name)
		}
	}
	return names
}

// NormShape is a batch-norm shape of a network: C channels of H×W values
// per sample, and the layers of that shape.
type NormShape struct {
	C, H, W int
	Layers  []string
}

// NormShapes lists the network's batch-norm shapes, in order of first
// use.
func (a Arch) NormShapes() []NormShape {
	nodes := a.mustNodes()
	groups, _ := groupNodes(nodes, KindBatchNorm, func(n node) [3]int { return [3]int{n.Out, n.in.H, n.in.W} })
	out := make([]NormShape, len(groups))
	for j, g := range groups {
		n := nodes[g[0]]
		out[j] = NormShape{C: n.Out, H: n.in.H, W: n.in.W, Layers: nodeNames(nodes, g)}
	}
	return out
}

// PoolShape is a pool's: input C×H×W, K×K windows at Stride, padded by
// Pad, the maximum (Max) or the mean; its layers ("layer 3": pools have
// no names).
type PoolShape struct {
	Max                     bool
	C, H, W, K, Stride, Pad int
	Layers                  []string
}

// PoolShapes lists the network's pool shapes: the max pools', then the
// average pools', each in order of first use.
func (a Arch) PoolShapes() []PoolShape {
	nodes := a.mustNodes()
	var out []PoolShape
	for _, kind := range []string{KindMaxPool, KindAvgPool} {
		groups, _ := groupNodes(nodes, kind, func(n node) [6]int { return [6]int{n.in.C, n.in.H, n.in.W, n.Kernel, n.Stride, n.Pad} })
		for _, g := range groups {
			n := nodes[g[0]]
			out = append(out, PoolShape{Max: kind == KindMaxPool, C: n.in.C, H: n.in.H, W: n.in.W, K: n.Kernel, Stride: n.Stride, Pad: n.Pad,
				Layers: layerNumbers(g)})
		}
	}
	return out
}

// layerNumbers names unnamed layers by their place: "layer 3".
func layerNumbers(idx []int) []string {
	names := make([]string, len(idx))
	for k, i := range idx {
		names[k] = fmt.Sprintf("layer %d", i)
	}
	return names
}

// groupNodes groups the nodes of kind by key, in order of first use: each
// group's nodes, and for each node of kind in order its group's index.
func groupNodes[K comparable](nodes []node, kind string, key func(node) K) (groups [][]int, of []int) {
	idx := map[K]int{}
	for i, n := range nodes {
		if n.Kind != kind {
			continue
		}
		k := key(n)
		j, ok := idx[k]
		if !ok {
			j = len(groups)
			idx[k] = j
			groups = append(groups, nil)
		}
		groups[j] = append(groups[j], i)
		of = append(of, j)
	}
	return groups, of
}

// nodeNames names the nodes at idx.
func nodeNames(nodes []node, idx []int) []string {
	names := make([]string, len(idx))
	for k, i := range idx {
		names[k] = nodes[i].Name
	}
	return names
}
