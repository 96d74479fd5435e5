package model

import (
	"archive/zip"
	"fmt"
	"io"

	"github.com/dml-project/dml/internal/npy"
	"github.com/dml-project/dml/internal/regfile"
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
	return SaveNPZLabels(path, arch, params, nil)
}

// SaveNPZLabels is SaveNPZ with the model's class labels (nil, or the
// identity: none saved).
func SaveNPZLabels(path string, arch Arch, params []float32, labels []int64) error {
	if len(params) != arch.NumParams() {
		return fmt.Errorf("save %s: %d parameters, the model has %d", path, len(params), arch.NumParams())
	}
	err := atomicfile.Write(path, 0o644, func(f io.Writer) error {
		return WriteNPZModel(f, arch, params, nil, labels)
	})
	if err != nil {
		return fmt.Errorf("save %w", err)
	}
	return nil
}

// WriteNPZ writes the archive SaveNPZ saves to w (a checkpoint embeds it).
func WriteNPZ(f io.Writer, arch Arch, params []float32) error {
	return WriteNPZModel(f, arch, params, nil, nil)
}

// WriteNPZLabels is WriteNPZ with the model's class labels (see
// ClassLabelsKey). The entries are deflated, named without numpy.savez's
// ".npy" suffix, in format 2.0 (npy.Float32).
func WriteNPZLabels(f io.Writer, arch Arch, params []float32, labels []int64) error {
	return WriteNPZModel(f, arch, params, nil, labels)
}

// SaveNPZModel is SaveNPZLabels with a network's state (batch norms'
// running statistics, Arch.StateTensors; nil: the initial state).
func SaveNPZModel(path string, arch Arch, params, state []float32, labels []int64) error {
	if len(params) != arch.NumParams() {
		return fmt.Errorf("save %s: %d parameters, the model has %d", path, len(params), arch.NumParams())
	}
	err := atomicfile.Write(path, 0o644, func(f io.Writer) error {
		return WriteNPZModel(f, arch, params, state, labels)
	})
	if err != nil {
		return fmt.Errorf("save %w", err)
	}
	return nil
}

// WriteNPZModel is WriteNPZLabels with the network's state (nil: the
// initial state), after the parameters, as PyTorch's buffers.
func WriteNPZModel(f io.Writer, arch Arch, params, state []float32, labels []int64) error {
	if len(params) != arch.NumParams() {
		return fmt.Errorf("%d parameters, the model has %d", len(params), arch.NumParams())
	}
	if state == nil {
		state = arch.InitState()
	}
	if len(state) != arch.NumState() {
		return fmt.Errorf("%d state values, the model has %d", len(state), arch.NumState())
	}
	w := npy.NewWriter(f, zip.Deflate)
	if !IdentityLabels(labels) {
		v := make([]float64, len(labels))
		for i, l := range labels {
			if l > 1<<53 || l < -(1<<53) {
				w.Close()
				return fmt.Errorf("class label %d cannot be saved exactly (|label| > 2^53)", l)
			}
			v[i] = float64(l)
		}
		if err := w.Add(ClassLabelsKey, npy.Float64(v, len(v))); err != nil {
			w.Close()
			return err
		}
	}
	for _, t := range arch.Tensors() {
		if err := w.Add(t.Name, npy.Float32(params[t.Off:t.Off+t.Len()], t.Shape...)); err != nil {
			w.Close()
			return err
		}
	}
	for _, t := range arch.Aliases() {
		if err := w.Add(t.Name, npy.Float32(params[t.Off:t.Off+t.Len()], t.Shape...)); err != nil {
			w.Close()
			return err
		}
	}
	for _, t := range arch.StateTensors() {
		if err := w.Add(t.Name, npy.Float32(state[t.Off:t.Off+t.Len()], t.Shape...)); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
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
