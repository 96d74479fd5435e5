package model

import (
	"archive/zip"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sbinet/npyio/npz"

	"github.com/dml-project/dml/internal/npy"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/trainer/internal/numtest"
)

func TestNPZRoundTrip(t *testing.T) {
	arch, _ := NewArch(5, []int{4, 3}, 2, SoftmaxCE)
	p := arch.InitParams(9)
	path := filepath.Join(t.TempDir(), "w.npz")
	if err := SaveNPZ(path, arch, p); err != nil {
		t.Fatal(err)
	}
	got, q, err := LoadNPZ(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Sizes) != 4 || got.Sizes[1] != 4 || got.Loss != SoftmaxCE || numtest.MaxRelDiff(q, p) != 0 {
		t.Fatalf("read back %v, %d params", got.Sizes, len(q))
	}
}

func TestLoadNPZErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.npz")
	w, _ := npz.Create(bad)
	w.Write("layer0.weight", []float32{1, 2, 3}) // 1-D: not [out, in]
	w.Write("layer0.bias", []float32{1})
	w.Close()
	odd := filepath.Join(dir, "odd.npz")
	w, _ = npz.Create(odd)
	w.Write("conv1.weight", []float32{1})
	w.Close()
	os.WriteFile(filepath.Join(dir, "junk.npz"), []byte("not a zip"), 0o644)
	for name, want := range map[string]string{"bad.npz": "want [out, in]", "odd.npz": "unexpected array", "junk.npz": "junk.npz", "none.npz": "none.npz"} {
		if _, _, err := LoadNPZ(filepath.Join(dir, name)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, want)
		}
	}
}

// TestNumpyReadsCheckpoint: numpy loads the .npz as it is, and its forward
// pass (x Wᵀ + b, ReLU between layers) gives our logits.
func TestNumpyReadsCheckpoint(t *testing.T) {
	py := ""
	for _, cand := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(cand, "-c", "import numpy").Run() == nil {
			py = cand
			break
		}
	}
	if py == "" {
		t.Skip("no python3 with numpy (make deps installs Debian's python3-numpy)")
	}
	arch, _ := NewArch(6, []int{5}, 3, SoftmaxCE)
	p := arch.InitParams(4)
	dir := t.TempDir()
	wpath, xpath := filepath.Join(dir, "w.npz"), filepath.Join(dir, "x.npz")
	if err := SaveNPZ(wpath, arch, p); err != nil {
		t.Fatal(err)
	}
	const rows = 4
	x := make([]float32, rows*6)
	for i := range x {
		x[i] = float32(i%7) / 7
	}
	var xb bytes.Buffer
	xw := npy.NewWriter(&xb, zip.Deflate)
	if err := xw.Add("x", npy.Float32(x, rows, 6)); err != nil || xw.Close() != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(xpath, xb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	b := cpu.New()
	m, err := New(arch, b, rows)
	if err != nil {
		t.Fatal(err)
	}
	b.Upload(m.Params, p)
	if err := m.Upload(append(append([]float32(nil), x...), make([]float32, rows)...), rows); err != nil {
		t.Fatal(err)
	}
	logits, err := m.Forward()
	if err != nil {
		t.Fatal(err)
	}
	ours := make([]float32, rows*3)
	b.Download(ours, logits)
	script := `
import sys, numpy as np
w = np.load(sys.argv[1]); x = np.load(sys.argv[2])["x"]
h = np.maximum(x @ w["layer0.weight"].T + w["layer0.bias"], 0)
z = h @ w["layer1.weight"].T + w["layer1.bias"]
assert w["layer0.weight"].dtype == np.float32 and w["layer0.weight"].shape == (5, 6)
print(" ".join(repr(float(v)) for v in z.ravel()))
`
	out, err := exec.Command(py, "-c", script, wpath, xpath).CombinedOutput()
	if err != nil {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	fields := strings.Fields(string(out))
	if len(fields) != len(ours) {
		t.Fatalf("numpy gave %d logits, want %d: %s", len(fields), len(ours), out)
	}
	for i, f := range fields {
		v, _ := strconv.ParseFloat(f, 64)
		if d := v - float64(ours[i]); d > 1e-5 || d < -1e-5 {
			t.Errorf("logit %d: numpy %v, dml %v", i, v, ours[i])
		}
	}
}

// TestClassLabelsRoundTrip: class labels other than 0 … K-1 are saved with
// the weights and read back; the identity writes the very bytes of a save
// without labels (weights of Fashion-MNIST or synthetic models are
// unchanged); labels that do not fit the model are refused.
func TestClassLabelsRoundTrip(t *testing.T) {
	arch, err := NewArch(4, []int{3}, 3, SoftmaxCE)
	if err != nil {
		t.Fatal(err)
	}
	p := arch.InitParams(1)
	var plain, ident, labelled bytes.Buffer
	if err := WriteNPZ(&plain, arch, p); err != nil {
		t.Fatal(err)
	}
	if err := WriteNPZLabels(&ident, arch, p, []int64{0, 1, 2}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(plain.Bytes(), ident.Bytes()) {
		t.Error("identity labels changed the saved bytes")
	}
	if err := WriteNPZLabels(&labelled, arch, p, []int64{-7, 1, 1 << 40}); err != nil {
		t.Fatal(err)
	}
	_, q, labels, err := ReadNPZLabels(bytes.NewReader(labelled.Bytes()), int64(labelled.Len()))
	if err != nil || !slices.Equal(labels, []int64{-7, 1, 1 << 40}) || !slices.Equal(p, q) {
		t.Errorf("read back labels %v, %v", labels, err)
	}
	if _, _, labels, _ := ReadNPZLabels(bytes.NewReader(plain.Bytes()), int64(plain.Len())); labels != nil {
		t.Errorf("no labels saved, %v read", labels)
	}
	var short bytes.Buffer
	if err := WriteNPZLabels(&short, arch, p, []int64{5, 6}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := ReadNPZLabels(bytes.NewReader(short.Bytes()), int64(short.Len())); err == nil || !strings.Contains(err.Error(), "want [3] (one label per class") {
		t.Errorf("2 labels for 3 classes: %v", err)
	}
}
