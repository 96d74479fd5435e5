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
	return SaveNPZLabels(path, arch, params, nil)
}

// ClassLabelsKey is the .npz entry that holds a model's class labels: the
// label that output class k stands for in the data it was trained on
// (float64, exact for integers below 2^53). It is written only when the
// mapping is not the identity (classes 0 … K-1 with labels 0 … K-1), so
// the weights of models trained on data labelled 0 … K-1 are unchanged.
const ClassLabelsKey = "class_labels"

// SaveNPZLabels is SaveNPZ with the model's class labels (nil, or the
// identity: none saved).
func SaveNPZLabels(path string, arch Arch, params []float32, labels []int64) error {
	if len(params) != arch.NumParams() {
		return fmt.Errorf("save %s: %d parameters, the model has %d", path, len(params), arch.NumParams())
	}
	err := atomicfile.Write(path, 0o644, func(f io.Writer) error {
		return WriteNPZLabels(f, arch, params, labels)
	})
	if err != nil {
		return fmt.Errorf("save %w", err)
	}
	return nil
}

// WriteNPZ writes the archive SaveNPZ saves to w (a checkpoint embeds it).
func WriteNPZ(f io.Writer, arch Arch, params []float32) error {
	return WriteNPZLabels(f, arch, params, nil)
}

// WriteNPZLabels is WriteNPZ with the model's class labels (see
// ClassLabelsKey).
func WriteNPZLabels(f io.Writer, arch Arch, params []float32, labels []int64) error {
	if len(params) != arch.NumParams() {
		return fmt.Errorf("%d parameters, the model has %d", len(params), arch.NumParams())
	}
	w := npz.NewWriter(f)
	if !IdentityLabels(labels) {
		v := make([]float64, len(labels))
		for i, l := range labels {
			if l > 1<<53 || l < -(1<<53) {
				w.Close()
				return fmt.Errorf("class label %d cannot be saved exactly (|label| > 2^53)", l)
			}
			v[i] = float64(l)
		}
		if err := w.Write(ClassLabelsKey, v); err != nil {
			w.Close()
			return err
		}
	}
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
	arch, params, _, err := LoadNPZLabels(path)
	return arch, params, err
}

// IdentityLabels reports whether labels maps class k to label k for every
// k (or is empty): the mapping of data labelled 0 … K-1.
func IdentityLabels(labels []int64) bool {
	for k, l := range labels {
		if l != int64(k) {
			return false
		}
	}
	return true
}

// LoadNPZLabels is LoadNPZ that also returns the class labels saved with
// the weights (nil when none were: the identity). A path that is not a
// regular file (a folder, a FIFO) is refused by regfile.Open.
func LoadNPZLabels(path string) (Arch, []float32, []int64, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return Arch{}, nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Arch{}, nil, nil, err
	}
	arch, params, labels, err := ReadNPZLabels(f, st.Size())
	if err != nil {
		return Arch{}, nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return arch, params, labels, nil
}
