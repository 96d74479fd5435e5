package model

import (
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/sbinet/npyio/npz"

	"github.com/dml-project/dml/trainer/atomicfile"
)

// SaveNPZ writes the weights as a numpy .npz archive in PyTorch's layout:
// for layer k, "layerK.weight" of shape [out, in] and "layerK.bias" of shape
// [out], float32. numpy.load reads it as it is, and each pair loads into
// torch.nn.Linear(in, out) with load_state_dict after renaming the keys.
//
// The file is replaced atomically (atomicfile.Write): a kill or a full disk
// during the save leaves the previous file at path as it was.
func SaveNPZ(path string, arch Arch, params []float32) error {
	if len(params) != arch.NumParams() {
		return fmt.Errorf("save %s: %d parameters, the model has %d", path, len(params), arch.NumParams())
	}
	err := atomicfile.Write(path, 0o644, func(f io.Writer) error {
		return WriteNPZ(f, arch, params)
	})
	if err != nil {
		return fmt.Errorf("save %w", err)
	}
	return nil
}

// WriteNPZ writes the archive SaveNPZ saves to w (a checkpoint embeds it).
func WriteNPZ(f io.Writer, arch Arch, params []float32) error {
	if len(params) != arch.NumParams() {
		return fmt.Errorf("%d parameters, the model has %d", len(params), arch.NumParams())
	}
	w := npz.NewWriter(f)
	for k, l := range arch.Layers() {
		if err := w.Write(fmt.Sprintf("layer%d.weight", k), matrix(params[l.WOff:l.BOff], l.Out, l.In)); err != nil {
			w.Close()
			return err
		}
		if err := w.Write(fmt.Sprintf("layer%d.bias", k), params[l.BOff:l.BOff+l.Out]); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}

// matrix views rows×cols float32s as a Go array [rows][cols]float32, the
// one form of a 2-D float32 array that npyio writes with its shape (it knows
// gonum's float64 matrices, and slices of slices only as ragged data).
func matrix(v []float32, rows, cols int) any {
	if rows == 0 || cols == 0 {
		return reflect.New(reflect.ArrayOf(rows, reflect.ArrayOf(cols, reflect.TypeFor[float32]()))).Interface()
	}
	t := reflect.ArrayOf(rows, reflect.ArrayOf(cols, reflect.TypeFor[float32]()))
	return reflect.NewAt(t, unsafe.Pointer(&v[0])).Interface()
}

// LoadNPZ reads weights written by SaveNPZ (or by numpy from a PyTorch
// model's linear layers renamed layer0…layerK) and rebuilds the
// architecture from their shapes: one output means logistic loss,
// more mean softmax.
func LoadNPZ(path string) (Arch, []float32, error) {
	r, err := npz.Open(path)
	if err != nil {
		return Arch{}, nil, fmt.Errorf("--weights %s: %w", path, err)
	}
	defer r.Close()
	layers := map[int]bool{}
	for _, key := range r.Keys() {
		name := strings.TrimSuffix(key, ".npy")
		var k int
		var kind string
		if n, _ := fmt.Sscanf(strings.Replace(name, ".", " ", 1), "layer%d %s", &k, &kind); n != 2 || (kind != "weight" && kind != "bias") {
			return Arch{}, nil, fmt.Errorf("%s: unexpected array %q (want layerK.weight and layerK.bias)", path, key)
		}
		layers[k] = true
	}
	if len(layers) == 0 {
		return Arch{}, nil, fmt.Errorf("%s: no layerK.weight arrays", path)
	}
	ks := make([]int, 0, len(layers))
	for k := range layers {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	var sizes []int
	var ws, bs [][]float32
	for i, k := range ks {
		if k != i {
			return Arch{}, nil, fmt.Errorf("%s: layers must be numbered 0..%d, found layer%d", path, len(ks)-1, k)
		}
		wkey, bkey := "layer"+strconv.Itoa(k)+".weight", "layer"+strconv.Itoa(k)+".bias"
		wh, bh := r.Header(wkey), r.Header(bkey)
		if wh == nil || bh == nil {
			return Arch{}, nil, fmt.Errorf("%s: layer%d needs both .weight and .bias", path, k)
		}
		if len(wh.Descr.Shape) != 2 || len(bh.Descr.Shape) != 1 || bh.Descr.Shape[0] != wh.Descr.Shape[0] {
			return Arch{}, nil, fmt.Errorf("%s: layer%d has weight shape %v and bias shape %v, want [out, in] and [out]",
				path, k, wh.Descr.Shape, bh.Descr.Shape)
		}
		out, in := wh.Descr.Shape[0], wh.Descr.Shape[1]
		if i == 0 {
			sizes = append(sizes, in)
		} else if in != sizes[len(sizes)-1] {
			return Arch{}, nil, fmt.Errorf("%s: layer%d takes %d inputs but layer%d gives %d", path, k, in, k-1, sizes[len(sizes)-1])
		}
		sizes = append(sizes, out)
		var w, b []float32
		if err := r.Read(wkey, &w); err != nil {
			return Arch{}, nil, fmt.Errorf("%s: %s: %w", path, wkey, err)
		}
		if err := r.Read(bkey, &b); err != nil {
			return Arch{}, nil, fmt.Errorf("%s: %s: %w", path, bkey, err)
		}
		ws, bs = append(ws, w), append(bs, b)
	}
	loss := SoftmaxCE
	if sizes[len(sizes)-1] == 1 {
		loss = SigmoidCE
	}
	arch, err := NewArch(sizes[0], sizes[1:len(sizes)-1], sizes[len(sizes)-1], loss)
	if err != nil {
		return Arch{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	params := make([]float32, arch.NumParams())
	for k, l := range arch.Layers() {
		if len(ws[k]) != l.In*l.Out || len(bs[k]) != l.Out {
			return Arch{}, nil, fmt.Errorf("%s: layer%d holds %d+%d values, its shape says %d+%d", path, k, len(ws[k]), len(bs[k]), l.In*l.Out, l.Out)
		}
		copy(params[l.WOff:], ws[k])
		copy(params[l.BOff:], bs[k])
	}
	return arch, params, nil
}
