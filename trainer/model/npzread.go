package model

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/dml-project/dml/internal/npy"
	"github.com/dml-project/dml/internal/regfile"
	"github.com/dml-project/dml/trainer/internal/inflate"
)

// npzEntry is one array of an .npz archive whose header has been checked.
type npzEntry struct {
	f     *zip.File
	name  string // as in the archive
	h     npy.Header
	dtype npy.Dtype
}

// ReadNPZ reads an .npz archive of size bytes from r into an architecture
// and its flat parameters (the inverse of WriteNPZ). The archive may hold
// only arrays named layerK.weight ([out, in]) and layerK.bias ([out]), with
// or without numpy.savez's ".npy" suffix, for K = 0, 1, …, stored or
// deflated, float32 or float64 (converted to float32), C or Fortran order;
// in a dml checkpoint (an archive with a meta.json entry) other entries are
// skipped.
//
// Nothing is allocated for the data until every header has been read and
// checked: each array's shape must match its entry's size exactly (no
// truncated or padded arrays), the entries together may not claim more than
// the file can hold (stored) or decompress to (inflate.Limit), and the
// shapes must chain into a network. The data is then read and its CRC
// checked; NaN or ±Inf weights are refused. Every error is one line.
func ReadNPZ(r io.ReaderAt, size int64) (Arch, []float32, error) {
	arch, params, _, err := ReadNPZLabels(r, size)
	return arch, params, err
}

// ReadNPZLabels is ReadNPZ that also reads the class labels (ClassLabelsKey:
// one distinct integer per output class; nil when the archive has none).
func ReadNPZLabels(r io.ReaderAt, size int64) (Arch, []float32, []int64, error) {
	arch, params, labelsEntry, err := readNPZ(r, size)
	if err != nil || labelsEntry == nil {
		return arch, params, nil, err
	}
	labels, err := readLabels(labelsEntry, arch)
	if err != nil {
		return Arch{}, nil, nil, fmt.Errorf("%s: %w", labelsEntry.name, err)
	}
	return arch, params, labels, nil
}

// readLabels reads and checks the class labels entry of a model arch.
func readLabels(e *npzEntry, arch Arch) ([]int64, error) {
	classes := max(2, arch.Sizes[len(arch.Sizes)-1])
	if len(e.h.Shape) != 1 || e.h.Shape[0] != classes {
		return nil, fmt.Errorf("shape %v, want [%d] (one label per class of the model)", e.h.Shape, classes)
	}
	raw, err := readNPZFloat64(e, classes)
	if err != nil {
		return nil, err
	}
	return checkLabels(raw)
}

// checkLabels turns class labels saved as float64 into integers, one
// distinct integer per class.
func checkLabels(raw []float64) ([]int64, error) {
	labels := make([]int64, len(raw))
	seen := map[int64]bool{}
	for k, f := range raw {
		if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return nil, fmt.Errorf("label %v of class %d is not an integer", f, k)
		}
		labels[k] = int64(f)
		if seen[labels[k]] {
			return nil, fmt.Errorf("label %d stands for two classes", labels[k])
		}
		seen[labels[k]] = true
	}
	return labels, nil
}

// readNPZFloat64 reads a small 1-D entry of n elements as float64.
func readNPZFloat64(e *npzEntry, n int) ([]float64, error) {
	rc, err := e.f.Open()
	if err != nil {
		return nil, zipErr(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, e.h.DataOff+int64(n*e.dtype.Size)+1))
	if err != nil {
		return nil, zipErr(err)
	}
	out := make([]float64, n)
	npy.Float64s(e.dtype, b[e.h.DataOff:], out)
	return out, nil
}

func readNPZ(r io.ReaderAt, size int64) (Arch, []float32, *npzEntry, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return Arch{}, nil, nil, fmt.Errorf("not an .npz archive (numpy.savez writes a zip file): %v", err)
	}
	weights, biases, labels, err := npzLayers(zr, size)
	if err != nil {
		return Arch{}, nil, nil, err
	}
	sizes, err := npzSizes(weights, biases)
	if err != nil {
		return Arch{}, nil, nil, err
	}
	loss := SoftmaxCE
	if sizes[len(sizes)-1] == 1 {
		loss = SigmoidCE
	}
	arch, err := NewArch(sizes[0], sizes[1:len(sizes)-1], sizes[len(sizes)-1], loss)
	if err != nil {
		return Arch{}, nil, nil, err
	}
	params, err := npzParams(arch, weights, biases)
	if err != nil {
		return Arch{}, nil, nil, err
	}
	return arch, params, labels, nil
}

// npzLayers finds the archive's layerK.weight and layerK.bias arrays (by
// K) and its class labels, reading their headers; the sizes they claim
// are bounded by the file's (inflate.Limit).
func npzLayers(zr *zip.Reader, size int64) (weights, biases map[int]*npzEntry, labels *npzEntry, err error) {
	// A dml checkpoint (it holds meta.json) carries optimizer state and
	// more beside the weights: those entries are skipped, unread.
	checkpoint := false
	for _, zf := range zr.File {
		checkpoint = checkpoint || zf.Name == "meta.json"
	}
	weights, biases = map[int]*npzEntry{}, map[int]*npzEntry{}
	var claimed int64
	for _, zf := range zr.File {
		k, kind, ok := layerKey(zf.Name)
		if strings.TrimSuffix(zf.Name, ".npy") == ClassLabelsKey {
			if labels != nil {
				return nil, nil, nil, fmt.Errorf("two %s arrays", ClassLabelsKey)
			}
			if zf.UncompressedSize64 > 1<<20 {
				return nil, nil, nil, fmt.Errorf("%s claims %d bytes", zf.Name, zf.UncompressedSize64)
			}
			e, err := readNPZHeader(zf, size)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("%s: %w", zf.Name, err)
			}
			labels = e
			continue
		}
		if !ok && checkpoint {
			continue
		}
		if !ok {
			return nil, nil, nil, fmt.Errorf("unexpected array %q (want layerK.weight and layerK.bias)", zf.Name)
		}
		m := weights
		if kind == "bias" {
			m = biases
		}
		if prev := m[k]; prev != nil {
			return nil, nil, nil, fmt.Errorf("arrays %q and %q are both layer%d.%s", prev.name, zf.Name, k, kind)
		}
		if zf.UncompressedSize64 > uint64(inflate.Limit(size)) || claimed+int64(zf.UncompressedSize64) > inflate.Limit(size) {
			return nil, nil, nil, fmt.Errorf("arrays claim more than %d bytes in a file of %d bytes: %s",
				inflate.Limit(size), size, inflate.Reason(size))
		}
		claimed += int64(zf.UncompressedSize64)
		e, err := readNPZHeader(zf, size)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", zf.Name, err)
		}
		m[k] = e
	}
	return weights, biases, labels, nil
}

// npzSizes checks the layers' shapes against each other (numbered from 0,
// each with its bias, each taking what the last gives) and returns the
// MLP's sizes, input first.
func npzSizes(weights, biases map[int]*npzEntry) ([]int, error) {
	if len(weights) == 0 {
		return nil, fmt.Errorf("no layerK.weight arrays")
	}
	var sizes []int
	for k := 0; k < len(weights); k++ {
		w, b := weights[k], biases[k]
		if w == nil {
			return nil, fmt.Errorf("layers must be numbered 0..%d, layer%d.weight is missing", len(weights)-1, k)
		}
		if b == nil {
			return nil, fmt.Errorf("layer%d needs both .weight and .bias", k)
		}
		ws, bs := w.h.Shape, b.h.Shape
		if len(ws) != 2 || len(bs) != 1 || bs[0] != ws[0] {
			return nil, fmt.Errorf("layer%d has weight shape %v and bias shape %v, want [out, in] and [out]", k, ws, bs)
		}
		out, in := ws[0], ws[1]
		if k == 0 {
			sizes = append(sizes, in)
		} else if in != sizes[len(sizes)-1] {
			return nil, fmt.Errorf("layer%d takes %d inputs but layer%d gives %d", k, in, k-1, sizes[len(sizes)-1])
		}
		sizes = append(sizes, out)
	}
	if len(biases) != len(weights) {
		return nil, fmt.Errorf("%d layerK.bias arrays for %d layerK.weight arrays", len(biases), len(weights))
	}
	return sizes, nil
}

// npzParams reads the arrays' values into arch's parameter vector, and
// refuses a NaN or ±Inf.
func npzParams(arch Arch, weights, biases map[int]*npzEntry) ([]float32, error) {
	// The shapes were checked against the entries' sizes, whose sum was
	// checked against the file: this allocation is bounded by the input.
	params := make([]float32, arch.NumParams())
	for k, l := range arch.Layers() {
		if err := readNPZData(weights[k], params[l.WOff:l.BOff]); err != nil {
			return nil, fmt.Errorf("%s: %w", weights[k].name, err)
		}
		if err := readNPZData(biases[k], params[l.BOff:l.BOff+l.Out]); err != nil {
			return nil, fmt.Errorf("%s: %w", biases[k].name, err)
		}
	}
	for k, l := range arch.Layers() {
		for _, t := range []struct {
			name string
			v    []float32
		}{{"weight", params[l.WOff:l.BOff]}, {"bias", params[l.BOff : l.BOff+l.Out]}} {
			if !AllFinite(t.v) {
				return nil, fmt.Errorf("layer%d.%s holds NaN or ±Inf", k, t.name)
			}
		}
	}
	return params, nil
}

// layerKey parses "layerK.weight" or "layerK.bias", optionally with a
// ".npy" suffix; K is decimal without leading zeros.
func layerKey(name string) (k int, kind string, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSuffix(name, ".npy"), "layer")
	if !found {
		return 0, "", false
	}
	num, kind, found := strings.Cut(rest, ".")
	if !found || (kind != "weight" && kind != "bias") || num == "" || len(num) > 6 || (num[0] == '0' && num != "0") {
		return 0, "", false
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, "", false
		}
	}
	k, err := strconv.Atoi(num)
	return k, kind, err == nil
}

// readNPZHeader checks an entry's zip sizes and its .npy header against
// each other and against the archive's size, reading only the header.
func readNPZHeader(zf *zip.File, archive int64) (*npzEntry, error) {
	usize := int64(zf.UncompressedSize64) // ≤ inflate.Limit, checked by the caller
	switch {
	case zf.Method != zip.Store && zf.Method != zip.Deflate:
		return nil, fmt.Errorf("compression method %d is not supported (numpy writes stored or deflated entries)", zf.Method)
	case zf.CompressedSize64 > uint64(archive):
		return nil, fmt.Errorf("entry claims %d compressed bytes in a file of %d bytes", zf.CompressedSize64, archive)
	case zf.Method == zip.Store && zf.CompressedSize64 != zf.UncompressedSize64:
		return nil, fmt.Errorf("stored entry claims %d bytes but occupies %d", zf.UncompressedSize64, zf.CompressedSize64)
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, zipErr(err)
	}
	defer rc.Close()
	// The preamble: 10 bytes, 12 from version 2 on.
	pre := make([]byte, 12)
	k := min(10, usize)
	if _, err := io.ReadFull(rc, pre[:k]); err != nil {
		return nil, zipErr(err)
	}
	pre = pre[:k]
	if k == 10 && (pre[6] == 2 || pre[6] == 3) && usize >= 12 {
		pre = pre[:12]
		if _, err := io.ReadFull(rc, pre[10:]); err != nil {
			return nil, zipErr(err)
		}
	}
	hlen, start, err := npy.ReadPreamble(pre)
	if err != nil {
		return nil, err
	}
	if int64(start+hlen) > usize {
		return nil, fmt.Errorf(".npy header claims %d bytes, the entry holds %d in all: truncated", hlen, usize)
	}
	text := make([]byte, hlen)
	if _, err := io.ReadFull(rc, text); err != nil {
		return nil, zipErr(err)
	}
	h, err := npy.ParseHeader(string(text))
	if err != nil {
		return nil, err
	}
	h.DataOff = int64(start + hlen)
	dt, err := npy.DtypeOf(h.Descr)
	if err != nil {
		return nil, err
	}
	if err := npy.CheckSize(h, dt, usize-h.DataOff); err != nil {
		return nil, err
	}
	return &npzEntry{f: zf, name: zf.Name, h: h, dtype: dt}, nil
}

// readNPZData reads an entry's data into dst (len(dst) is the product of
// its checked shape), converting to float32 and, for a Fortran-order
// matrix, transposing into row-major order. Reading past the end checks the
// entry's CRC and size.
func readNPZData(e *npzEntry, dst []float32) error {
	rc, err := e.f.Open()
	if err != nil {
		return zipErr(err)
	}
	defer rc.Close()
	if _, err := io.CopyN(io.Discard, rc, e.h.DataOff); err != nil {
		return zipErr(err)
	}
	buf := make([]byte, 64<<10-64<<10%8)
	chunk := make([]float32, len(buf)/4)
	for i := 0; i < len(dst); {
		n := min(len(buf)/e.dtype.Size, len(dst)-i)
		b := buf[:n*e.dtype.Size]
		if _, err := io.ReadFull(rc, b); err != nil {
			return zipErr(err)
		}
		npy.Float32s(e.dtype, b, chunk[:n])
		for j, v := range chunk[:n] {
			dst[e.h.RowMajor(i+j)] = v
		}
		i += n
	}
	var one [1]byte
	if n, err := rc.Read(one[:]); n != 0 || err != io.EOF {
		if err == nil || err == io.EOF {
			return fmt.Errorf("trailing data after the array")
		}
		return zipErr(err)
	}
	return nil
}

// zipErr words archive/zip's errors for a person.
func zipErr(err error) error {
	switch {
	case errors.Is(err, zip.ErrChecksum):
		return fmt.Errorf("checksum mismatch: the file is corrupt")
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return fmt.Errorf("truncated entry")
	case errors.Is(err, zip.ErrFormat):
		return fmt.Errorf("corrupt entry: %v", err)
	}
	return err
}

// Array is one array of an .npz archive, as float32, row-major.
type Array struct {
	Shape []int
	Data  []float32
	// Exact holds the class labels array (ClassLabelsKey) as float64, as
	// it was saved: labels past 2^24 do not survive float32.
	Exact []float64
}

// ReadNPZArrays reads every array of an .npz archive of size bytes with
// ReadNPZ's checks (each entry's header, shape and size strict, stored or
// deflated, the entries together bounded by what the file can hold or
// decompress to, CRCs), by name without numpy's ".npy" suffix. A dml
// checkpoint's entries other than arrays (meta.json, the checksum) are
// skipped.
func ReadNPZArrays(r io.ReaderAt, size int64) (map[string]Array, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("not an .npz archive (numpy.savez writes a zip file): %v", err)
	}
	entries := map[string]*npzEntry{}
	var claimed int64
	for _, zf := range zr.File {
		if zf.Name == "meta.json" || zf.Name == "checksum.sha256" {
			continue
		}
		name := strings.TrimSuffix(zf.Name, ".npy")
		if entries[name] != nil {
			return nil, fmt.Errorf("two arrays named %q", name)
		}
		if zf.UncompressedSize64 > uint64(inflate.Limit(size)) || claimed+int64(zf.UncompressedSize64) > inflate.Limit(size) {
			return nil, fmt.Errorf("arrays claim more than %d bytes in a file of %d bytes: %s", inflate.Limit(size), size, inflate.Reason(size))
		}
		claimed += int64(zf.UncompressedSize64)
		e, err := readNPZHeader(zf, size)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", zf.Name, err)
		}
		entries[name] = e
	}
	out := map[string]Array{}
	for name, e := range entries {
		n := int(e.h.Elems(claimed))
		a := Array{Shape: e.h.Shape}
		if name == ClassLabelsKey {
			if len(e.h.Shape) != 1 || n > 1<<20 {
				return nil, fmt.Errorf("%s: shape %v, want one label per class", e.name, e.h.Shape)
			}
			a.Exact, err = readNPZFloat64(e, n)
		} else {
			a.Data = make([]float32, n)
			err = readNPZData(e, a.Data)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.name, err)
		}
		out[name] = a
	}
	return out, nil
}

// ParamsFrom lays arrays out as a's flat parameters: the archive must hold
// exactly a's tensors (Tensors: names and shapes) and, optionally, the
// class labels (ClassLabelsKey), which it returns (nil: none). Weights
// that are NaN or ±Inf are refused.
func (a Arch) ParamsFrom(arrays map[string]Array) ([]float32, []int64, error) {
	params := make([]float32, a.NumParams())
	want := map[string]bool{}
	for _, t := range a.Tensors() {
		want[t.Name] = true
		got, ok := arrays[t.Name]
		switch {
		case !ok:
			return nil, nil, fmt.Errorf("no array %s (shape %v) for model %s", t.Name, t.Shape, a.Describe())
		case !slices.Equal(got.Shape, t.Shape):
			return nil, nil, fmt.Errorf("%s has shape %v, the model needs %v", t.Name, got.Shape, t.Shape)
		case !AllFinite(got.Data):
			return nil, nil, fmt.Errorf("%s holds NaN or ±Inf", t.Name)
		}
		copy(params[t.Off:t.Off+t.Len()], got.Data)
	}
	for _, t := range a.StateTensors() {
		want[t.Name] = true
	}
	for _, t := range a.Aliases() { // a tied weight's second name: optional, but the same values
		want[t.Name] = true
		if got, ok := arrays[t.Name]; ok && (!slices.Equal(got.Shape, t.Shape) || !slices.Equal(got.Data, params[t.Off:t.Off+t.Len()])) {
			return nil, nil, fmt.Errorf("%s (shape %v) differs from the weight it is tied to (shape %v): the model ties them", t.Name, got.Shape, t.Shape)
		}
	}
	var labels []int64
	for name, arr := range arrays {
		switch {
		case want[name]:
		case name == ClassLabelsKey:
			var err error
			if labels, err = labelsFrom(arr, a); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", name, err)
			}
		default:
			return nil, nil, fmt.Errorf("unexpected array %q: model %s has none", name, a.Describe())
		}
	}
	return params, labels, nil
}

// StateFrom lays arrays' state tensors (Arch.StateTensors) out as a's
// state vector; a network with batch norms needs every one of them.
func (a Arch) StateFrom(arrays map[string]Array) ([]float32, error) {
	state := a.InitState()
	for _, t := range a.StateTensors() {
		got, ok := arrays[t.Name]
		switch {
		case !ok:
			return nil, fmt.Errorf("no array %s (shape %v) for model %s", t.Name, t.Shape, a.Describe())
		case !slices.Equal(got.Shape, t.Shape):
			return nil, fmt.Errorf("%s has shape %v, the model needs %v", t.Name, got.Shape, t.Shape)
		case !AllFinite(got.Data):
			return nil, fmt.Errorf("%s holds NaN or ±Inf", t.Name)
		case strings.HasSuffix(t.Name, ".running_var") && slices.ContainsFunc(got.Data, func(v float32) bool { return v < 0 }):
			return nil, fmt.Errorf("%s holds a negative variance", t.Name)
		}
		copy(state[t.Off:t.Off+t.Len()], got.Data)
	}
	return state, nil
}

// labelsFrom checks a class-labels array (one distinct integer per class).
func labelsFrom(arr Array, a Arch) ([]int64, error) {
	classes := max(2, a.Sizes[len(a.Sizes)-1])
	if len(arr.Shape) != 1 || arr.Shape[0] != classes {
		return nil, fmt.Errorf("shape %v, want [%d] (one label per class of the model)", arr.Shape, classes)
	}
	return checkLabels(arr.Exact)
}

// LoadNPZArrays is ReadNPZArrays on a file (a regular file only).
func LoadNPZArrays(path string) (map[string]Array, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	arrays, err := ReadNPZArrays(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return arrays, nil
}

// ClassLabelsKey is the .npz entry that holds a model's class labels: the
// label that output class k stands for in the data it was trained on
// (float64, exact for integers below 2^53). It is written only when the
// mapping is not the identity (classes 0 … K-1 with labels 0 … K-1), so
// the weights of models trained on data labelled 0 … K-1 are unchanged.
const ClassLabelsKey = "class_labels"
