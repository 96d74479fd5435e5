package main

import (
	"fmt"
	"math/rand/v2"
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

// TestModelFile: a network from --model-file trains on synthetic images,
// saves its layers' names, and dml eval --model-file reads them back with
// the accuracy training reported; a file or a flag combination that
// cannot be built is refused in one line naming the layer, exit 2, before
// any data is read.
func TestModelFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	net := write("net.yaml", "layers:\n  - {kind: conv, name: c1, out: 4, kernel: 3, pad: 1}\n  - {kind: relu}\n  - {kind: avgpool}\n  - {kind: flatten}\n  - {kind: linear, name: fc, out: 3}\n")
	w := filepath.Join(dir, "w.npz")
	data := []string{"--data", "synthetic-images", "--shape", "2x8x8", "--classes", "3", "--samples", "300", "--backend", "cpu"}
	r := dml(t, 0, append([]string{"train", "--model-file", net, "--epochs", "2", "--lr", "0.02", "--save", w}, data...)...)
	acc := regexp.MustCompile(`test accuracy (\d\.\d{4})`).FindStringSubmatch(r.stdout)
	if r.code != 0 || acc == nil || !strings.Contains(r.stdout, "training file 2×8×8: c1 4k3p1, relu, avgpool 8, flatten, fc 3") {
		t.Fatalf("train: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	e := dml(t, 0, append([]string{"eval", "--model-file", net, "--weights", w}, data...)...)
	if e.code != 0 || !strings.Contains(e.stdout, "accuracy "+acc[1]) {
		t.Fatalf("eval: exit %d, stdout %q, want accuracy %s\nstderr %s", e.code, e.stdout, acc[1], e.stderr)
	}
	for _, tc := range []struct {
		body string
		args []string
		want string
	}{
		{"layers:\n  - {kind: conv, name: c1, out: 4, kernal: 3}\n", nil, `line 2: unknown key "kernal"`},
		{"layers:\n  - {kind: conv, name: c1, out: 4, kernel: 3}\n  - {kind: linear, name: fc, out: 3}\n", nil, "layer 1 (linear fc): needs a flat input, but it gets 4×6×6 values per sample: put a flatten before it"},
		{"layers:\n  - {kind: conv, name: c1, out: 4, kernel: 9}\n  - {kind: flatten}\n  - {kind: linear, name: fc, out: 3}\n", nil, "layer 0 (conv c1): a 9×9 kernel is larger than its 8×8 input"},
		{"layers:\n  - {kind: flatten}\n  - {kind: linear, name: fc, out: 5}\n", nil, "the network ends in 5 values per sample, the data has 3 classes"},
		{"layers:\n  - {kind: flatten}\n  - {kind: linear, name: fc, out: 3}\n", []string{"--model", "mlp"}, "is set, but the model is mlp"},
	} {
		f := write("bad.yaml", tc.body)
		r := dml(t, 0, append(append([]string{"train", "--model-file", f}, tc.args...), data...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%q %v: exit %d, stderr %q; want exit 2 and one line with %q", tc.body, tc.args, r.code, r.stderr, tc.want)
		}
	}
}

// TestCIFAR100Data: --data cifar100 trains a network of 100 outputs on
// CIFAR-100's binary files (generated), cifar100-coarse one of 20 on the
// same files; a network of the wrong class count and a bad fine label are
// refused in one line, exit 2.
func TestCIFAR100Data(t *testing.T) {
	dir := t.TempDir()
	for f, name := range []string{"train.bin", "test.bin"} {
		var b []byte
		for r := range 60 - 30*f {
			fine := (r*7 + f) % 100
			b = append(b, byte(fine/5), byte(fine))
			for j := range 3072 {
				b = append(b, byte((fine*3+j)%256))
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	net := func(out int) string {
		p := filepath.Join(dir, fmt.Sprintf("net%d.yaml", out))
		os.WriteFile(p, []byte(fmt.Sprintf("layers:\n  - {kind: conv, name: c1, out: 4, kernel: 3, stride: 2}\n  - {kind: relu}\n  - {kind: avgpool}\n  - {kind: flatten}\n  - {kind: linear, name: fc, out: %d}\n", out)), 0o644)
		return p
	}
	for _, c := range []struct {
		data string
		out  int
	}{{"cifar100", 100}, {"cifar100-coarse", 20}} {
		r := dml(t, 2, "train", "--model-file", net(c.out), "--data", c.data, "--data-dir", dir, "--epochs", "1", "--backend", "cpu")
		if r.code != 0 || !strings.Contains(r.stdout, "training file 3×32×32: c1 4k3s2") || !strings.Contains(r.stdout, "on 60 samples") {
			t.Fatalf("%s: exit %d\nstdout %s\nstderr %s", c.data, r.code, r.stdout, r.stderr)
		}
	}
	r := dml(t, 0, "train", "--model-file", net(20), "--data", "cifar100", "--data-dir", dir)
	if r.code != 2 || !strings.Contains(r.stderr, "100 classes") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("20 outputs on cifar100: exit %d, stderr %q; want exit 2 and one line", r.code, r.stderr)
	}
	p := filepath.Join(dir, "test.bin")
	b, _ := os.ReadFile(p)
	b[3*3074+1] = 140
	os.WriteFile(p, b, 0o644)
	r = dml(t, 0, "train", "--model-file", net(100), "--data", "cifar100", "--data-dir", dir)
	if r.code != 2 || !strings.Contains(r.stderr, "test.bin: record 3 has label 140 (fine), want 0–99") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("bad fine label: exit %d, stderr %q; want exit 2 and one line naming it", r.code, r.stderr)
	}
}

// TestCIFAR10Data: --data cifar10 trains a CNN on a folder of CIFAR-10
// binary files (generated here: no CIFAR can be fetched) under mpirun, as
// 3×32×32 images; a truncated file is refused in one line naming it, exit 2.
func TestCIFAR10Data(t *testing.T) {
	dir := t.TempDir()
	for i, name := range []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"} {
		var b []byte
		for r := range 40 {
			y := (r + i) % 10
			b = append(b, byte(y))
			for j := range 3072 {
				b = append(b, byte((y*25+j*(y+1))%256))
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	net := filepath.Join(dir, "net.yaml")
	os.WriteFile(net, []byte("layers:\n  - {kind: conv, name: c1, out: 4, kernel: 3, stride: 2}\n  - {kind: relu}\n  - {kind: avgpool}\n  - {kind: flatten}\n  - {kind: linear, name: fc, out: 10}\n"), 0o644)
	r := dml(t, 2, "train", "--model-file", net, "--data", "cifar10", "--data-dir", dir, "--epochs", "1", "--backend", "cpu")
	if r.code != 0 || !strings.Contains(r.stdout, "training file 3×32×32: c1 4k3s2") || !strings.Contains(r.stdout, "on 200 samples") {
		t.Fatalf("train: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	p := filepath.Join(dir, "data_batch_4.bin")
	b, _ := os.ReadFile(p)
	os.WriteFile(p, b[:len(b)-7], 0o644)
	r = dml(t, 0, "train", "--model-file", net, "--data", "cifar10", "--data-dir", dir)
	if r.code != 2 || !strings.Contains(r.stderr, "data_batch_4.bin has 122913 bytes, not a whole number of 3073-byte records") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("truncated file: exit %d, stderr %q; want exit 2 and one line naming it", r.code, r.stderr)
	}
}

// TestCIFARPresets trains --model resnet20, vgg16, resnet50 and alexnet on
// generated CIFAR-10 files under mpirun with 2 ranks; dml eval reads the
// weights and the batch-norm running statistics back (PyTorch's
// state_dict names, buffers included) with the accuracy training
// reported, and when python3-torch is there, the PyTorch module of
// bench/torch loads them with strict=True and gives the same accuracy.
func TestCIFARPresets(t *testing.T) {
	dir := t.TempDir()
	for i, name := range []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"} {
		var b []byte
		for r := range 12 {
			y := (r*7 + i) % 4
			b = append(b, byte(y))
			for j := range 3072 {
				b = append(b, byte((y*60+(j%1024/32)*(y+1)*3+(r*j)%17)%256))
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// ResNet-20 for an epoch; VGG-16 and ResNet-50 (torchvision's keys,
	// 15 and 23 million parameters) for two steps.
	for _, c := range []struct {
		model, params string
		steps         []string
	}{{"resnet20", "272474 params", nil}, {"vgg16", "15253578 params", []string{"--max-steps", "2"}}, {"resnet50", "23520842 params", []string{"--max-steps", "2"}},
		{"alexnet", "28714826 params", []string{"--max-steps", "2"}}} {
		t.Run(c.model, func(t *testing.T) {
			w := filepath.Join(dir, c.model+".npz")
			r := dml(t, 2, append([]string{"train", "--model", c.model, "--data", "cifar10", "--data-dir", dir, "--epochs", "1", "--batch", "8", "--save", w}, c.steps...)...)
			acc := regexp.MustCompile(`test accuracy (\d\.\d{4})`).FindStringSubmatch(r.stdout)
			if r.code != 0 || acc == nil || !strings.Contains(r.stdout, c.params) {
				t.Fatalf("train: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
			}
			e := dml(t, 0, "eval", "--model", c.model, "--weights", w, "--data", "cifar10", "--data-dir", dir)
			if e.code != 0 || !strings.Contains(e.stdout, "accuracy "+acc[1]) {
				t.Fatalf("eval: exit %d, stdout %q, want accuracy %s\nstderr %s", e.code, e.stdout, acc[1], e.stderr)
			}
			py := "/usr/bin/python3"
			if exec.Command(py, "-c", "import torch").Run() != nil {
				t.Skipf("no python3-torch: the PyTorch check of the saved %s did not run", c.model)
			}
			out, err := exec.Command(py, "../../bench/torch/check_npz.py", "--model", c.model, "--cifar-dir", dir, w).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "accuracy "+acc[1]) {
				t.Fatalf("check_npz.py: %v: %s; want accuracy %s", err, out, acc[1])
			}
		})
	}
}

// TestCNNMemoryRefused: a CNN whose activations at this batch do not fit
// the rank's memory is refused before anything is allocated, saying what
// to lower; a smaller batch of the same model fits.
func TestCNNMemoryRefused(t *testing.T) {
	t.Setenv("DML_MEMORY_LIMIT", "200M")
	args := []string{"train", "--model", "resnet20", "--data", "synthetic-images", "--samples", "2000", "--epochs", "1", "--max-steps", "1", "--backend", "cpu"}
	r := dml(t, 0, append(args, "--batch", "512")...)
	if r.code != 2 || !strings.Contains(r.stderr, "parameters needs about 1.8 GB") || !strings.Contains(r.stderr, "lower --batch") {
		t.Errorf("batch 512: exit %d, stderr %q; want exit 2, the model's need, and --batch to lower", r.code, r.stderr)
	}
	if r := dml(t, 0, append(args, "--batch", "4", "--samples", "400")...); r.code != 0 {
		t.Errorf("batch 4: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestAccumulateFlag: --accumulate 3 at --batch 8 trains steps of 24 rows
// per rank (the start line says how) under mpirun, with allreduce, the
// parameter server and dpsgd; with --local-steps it is refused in one
// line, exit 2.
func TestAccumulateFlag(t *testing.T) {
	for _, c := range []struct {
		ranks int
		args  []string
		want  string
	}{
		{2, nil, "2 ranks × batch 24 (3 micro-batches of 8 accumulated)"},
		{3, []string{"--sync", "ps", "--servers", "1"}, "2 workers × batch 24 (3 micro-batches of 8 accumulated)"},
		{2, []string{"--sync", "dpsgd"}, "2 ranks × batch 24 (3 micro-batches of 8 accumulated)"},
	} {
		r := dml(t, c.ranks, append([]string{"train", "--data", "synthetic", "--samples", "400", "--features", "8", "--classes", "3", "--hidden", "8",
			"--epochs", "1", "--batch", "8", "--accumulate", "3", "--backend", "cpu"}, c.args...)...)
		if r.code != 0 || !strings.Contains(r.stdout, c.want) || !strings.Contains(r.stdout, "done: 9 steps") {
			t.Errorf("%v: exit %d\nstdout %s\nstderr %s", c.args, r.code, r.stdout, r.stderr)
		}
	}
	r := dml(t, 0, "train", "--data", "synthetic", "--accumulate", "2", "--local-steps", "4")
	if r.code != 2 || !strings.Contains(r.stderr, "--accumulate 2: with --local-steps 4 each rank steps its own model") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("with local SGD: exit %d, stderr %q; want exit 2 and one line", r.code, r.stderr)
	}
}

// TestSyncBNFlag: --sync-bn trains ResNet-20 under mpirun with allreduce
// and the parameter server under bsp; under adpsgd and ps with ssp it is
// refused in one line, exit 2.
func TestSyncBNFlag(t *testing.T) {
	for _, c := range []struct {
		ranks int
		args  []string
	}{{2, nil}, {3, []string{"--sync", "ps", "--servers", "1"}}} {
		r := dml(t, c.ranks, append([]string{"train", "--model", "resnet20", "--data", "synthetic-images", "--samples", "64", "--batch", "8", "--epochs", "1",
			"--max-steps", "2", "--sync-bn", "--backend", "cpu"}, c.args...)...)
		if r.code != 0 || !strings.Contains(r.stdout, "done: 2 steps") {
			t.Fatalf("%v: exit %d\nstdout %s\nstderr %s", c.args, r.code, r.stdout, r.stderr)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sync", "adpsgd"}, "--sync-bn needs a step all ranks take together: adpsgd's ranks share none"},
		{[]string{"--sync", "ps", "--consistency", "ssp"}, "--sync-bn needs the workers to step together: under --consistency ssp they do not"},
	} {
		r := dml(t, 0, append([]string{"train", "--model", "resnet20", "--data", "synthetic-images", "--sync-bn"}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", c.args, r.code, r.stderr, c.want)
		}
	}
	// A model without batch norm: the flag would do nothing (it was
	// ignored); so would --classes that the data set fixes otherwise.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", "synthetic", "--sync-bn"}, "--sync-bn: model mlp has no batch norm to synchronise"},
		{[]string{"--model", "lenet5", "--data", "synthetic-images", "--shape", "1x28x28", "--sync-bn"}, "--sync-bn: the network has no batch norm to synchronise"},
		{[]string{"--model", "resnet20", "--data", "cifar100-coarse", "--data-dir", t.TempDir(), "--classes", "100"}, "--classes 100: --data cifar100-coarse has 20 classes"},
	} {
		r := dml(t, 0, append([]string{"train"}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", c.args, r.code, r.stderr, c.want)
		}
	}
}

// TestPresetsOneStepEqualPyTorch: one SGD step of resnet20, vgg16,
// alexnet and resnet50 from the same weights and batch (generated
// CIFAR-10 files) gives the weights and batch-norm statistics of the
// PyTorch module's step in float64 within float32 rounding
// (bench/torch/one_step.py: at most 1e-4 relative, or ten times what
// PyTorch's own float32 step differs by, ResNet-50's 50 layers amplifying
// it); the dropout layers draw dml's mask on both sides.
func TestPresetsOneStepEqualPyTorch(t *testing.T) {
	py := "/usr/bin/python3"
	if exec.Command(py, "-c", "import torch").Run() != nil {
		t.Skip("no python3-torch: the PyTorch step cannot be computed")
	}
	dir := t.TempDir()
	for i, name := range []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"} {
		// Random pixels: structured images (shifted copies) put batch-norm
		// outputs on ReLU's kink, where float32 and float64 may take
		// different sides.
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		var b []byte
		for r := range 6 {
			b = append(b, byte((r*7+i)%10))
			for range 3072 {
				b = append(b, byte(rng.IntN(256)))
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []string{"resnet20", "vgg16", "alexnet", "resnet50"} {
		t.Run(m, func(t *testing.T) {
			common := []string{"train", "--model", m, "--data", "cifar10", "--data-dir", dir, "--batch", "4", "--shuffle=false",
				"--optimizer", "sgd", "--lr", "0.1", "--epochs", "1", "--kernels", "dml"}
			init, after := filepath.Join(dir, m+"-init.npz"), filepath.Join(dir, m+"-after.npz")
			for _, run := range []struct {
				steps, save string
			}{{"0", init}, {"1", after}} {
				if r := dml(t, 0, append(common, "--max-steps", run.steps, "--save", run.save)...); r.code != 0 {
					t.Fatalf("train: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
				}
			}
			out, err := exec.Command(py, "../../bench/torch/one_step.py", "--model", m, "--cifar-dir", dir, "--batch", "4", "--lr", "0.1", init, after).CombinedOutput()
			if err != nil {
				t.Fatalf("one_step.py: %v: %s", err, out)
			}
			t.Logf("%s", out)
		})
	}
}
