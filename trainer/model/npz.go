package model

import (
	"fmt"
	"io"
	"reflect"
	"unsafe"

	"github.com/sbinet/npyio/npz"

	"github.com/dml-project/dml/trainer/atomicfile"

	"github.com/dml-project/dml/internal/regfile"
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

// LoadNPZ reads weights written by SaveNPZ, by numpy.savez or by
// numpy.savez_compressed (entries "layerK.weight" or "layerK.weight.npy"),
// and rebuilds the architecture from their shapes: one output means logistic
// loss, more mean softmax. See ReadNPZ for what is checked.
func LoadNPZ(path string) (Arch, []float32, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return Arch{}, nil, fmt.Errorf("--weights: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Arch{}, nil, fmt.Errorf("--weights: %w", err)
	}
	if st.IsDir() {
		return Arch{}, nil, fmt.Errorf("--weights: %s is a folder, not an .npz file", path)
	}
	arch, params, err := ReadNPZ(f, st.Size())
	if err != nil {
		return Arch{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	return arch, params, nil
}
