package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLeNet5FashionMNIST: under mpirun with 2 ranks, --model lenet5 trains
// on Fashion-MNIST, saves PyTorch's state_dict keys, and dml eval --model
// lenet5 gives the accuracy training reported; when Debian's python3-torch
// is installed, the PyTorch module of bench/torch loads the file with
// load_state_dict(strict=True) and gives that accuracy too (that part
// skips, saying so, without torch).
func TestLeNet5FashionMNIST(t *testing.T) {
	if _, err := os.Stat("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"); err != nil {
		t.Skipf("Fashion-MNIST not installed (make deps installs dataset-fashion-mnist): %v", err)
	}
	w := filepath.Join(t.TempDir(), "lenet.npz")
	r := dml(t, 2, "train", "--model", "lenet5", "--data", "fashion-mnist", "--epochs", "1", "--max-steps", "60", "--save", w, "--backend", "cpu")
	acc := regexp.MustCompile(`test accuracy (\d\.\d{4})`).FindStringSubmatch(r.stdout)
	if r.code != 0 || acc == nil {
		t.Fatalf("train: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "training lenet5 1×28×28: conv1 6k5p2, relu, maxpool 2, conv2 16k5") || !strings.Contains(r.stdout, "61706 params") {
		t.Errorf("train's first line does not describe LeNet-5 of 61706 parameters:\n%s", r.stdout)
	}
	e := dml(t, 0, "eval", "--model", "lenet5", "--weights", w, "--data", "fashion-mnist", "--backend", "cpu")
	if e.code != 0 || !strings.Contains(e.stdout, "accuracy "+acc[1]) {
		t.Fatalf("eval: exit %d, stdout %q, want accuracy %s\nstderr %s", e.code, e.stdout, acc[1], e.stderr)
	}
	// Without --model the file is not an MLP's: the error says what to do.
	if e := dml(t, 0, "eval", "--weights", w, "--data", "fashion-mnist"); e.code == 0 || !strings.Contains(e.stderr, "--model") {
		t.Errorf("eval without --model: exit %d, stderr %q; want a pointer to --model", e.code, e.stderr)
	}
	py := "/usr/bin/python3"
	if exec.Command(py, "-c", "import torch").Run() != nil {
		t.Skipf("no python3-torch: the PyTorch check of the saved weights (bench/torch/check_npz.py) did not run")
	}
	out, err := exec.Command(py, "../../bench/torch/check_npz.py", "--model", "lenet5", w).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "accuracy "+acc[1]) {
		t.Fatalf("check_npz.py: %v: %s; want accuracy %s", err, out, acc[1])
	}
}
