package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dml-project/dml/kernels/onednn"
)

// TestBenchOps: dml bench ops prints a row per convolution and batch-norm
// shape with both providers' times, and bad input is one line, exit 2.
func TestBenchOps(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "vgg"}, `bench ops: --model "vgg": want a convolutional preset network: lenet5, resnet20, vgg16, resnet50 or alexnet`},
		{[]string{"--model", "gpt"}, `bench ops: --model "gpt": want a convolutional preset network`},
		{[]string{"--backend", "cpu"}, "bench ops: --backend cpu: want blas or cuda"},
		{[]string{"--kernels", "dml"}, `bench ops: --kernels "dml": want a library`},
		{[]string{"--kernels", "onednn,cudnn"}, `bench ops: --kernels "onednn,cudnn": onednn serves the blas backend and cudnn the cuda backend, and a run uses one backend`},
		{[]string{"--kernels", "cudnn"}, "bench ops: --backend blas: --kernels cudnn: no op of this backend is cudnn's; to use it: --backend cuda (cudnn serves it), in the binary `make build-cuda` builds (bin/dml-cuda)\n"},
		{[]string{"--kernels", "foo"}, `bench ops: --kernels "foo": unknown library "foo"`},
		{[]string{"--rounds", "0"}, "bench ops: --batch 64, --rounds 0: want a batch of 1 to 1048576 and 1 or more rounds"},
		// Sizes a panic or the kernel's OOM killer used to meet.
		{[]string{"--batch", "9999999999999"}, "want a batch of 1 to 1048576"},
		{[]string{"--model", "vgg16", "--batch", "1000000"}, "vgg16 at batch 1000000 needs about"},
		{[]string{"--blas-threads", "100000"}, "bench ops: --blas-threads 100000: want 1 to 4096"},
		{[]string{"--shape", "3xx"}, `bench ops: --shape "3xx": want CxHxW`},
		{[]string{"--model", "lenet5", "--shape", "3x4x4"}, "bench ops: --model lenet5 at --shape 3×4×4: layer 3 (conv conv2): a 5×5 kernel is larger"},
	} {
		r := dml(t, 0, append([]string{"bench", "ops"}, tc.args...)...)
		if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); r.code != 2 || len(lines) != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("bench ops %v: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if _, err := onednn.Load(1); err != nil && os.Getenv("CI") == "" {
		t.Skipf("no oneDNN here: %v", err)
	}
	r := dml(t, 0, "bench", "ops", "--model", "resnet20", "--batch", "2", "--rounds", "1")
	if r.code != 0 {
		t.Fatalf("bench ops: exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"against blas (", "conv: onednn 2.", "| conv | conv1 |", "| conv | layer1.0.conv1 (+5 alike) |", "| conv | layer3.0.shortcut.0 |",
		"| batchnorm | bn1 (+6 alike) |", "| batchnorm | layer3.0.bn1 (+6 alike) |", "| avgpool 8s8p0 of 64×8×8 | layer 70 |", "all layers, once each: dml "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("bench ops: no %q in\n%s", want, r.stdout)
		}
	}
	// ResNet-50 at 64×64: torchvision's stem, with its padded max pool.
	r = dml(t, 0, "bench", "ops", "--model", "resnet50", "--shape", "3x64x64", "--batch", "1", "--rounds", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "| maxpool 3s2p1 of 64×32×32 | layer 3 |") {
		t.Errorf("bench ops --model resnet50 --shape 3x64x64: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
}

// TestOneDNNAbsent: where oneDNN does not load (DML_ONEDNN_DIR naming a
// folder without it, or holding a library that lacks an entry point),
// --kernels auto says so in one notice line and trains on dml's kernels;
// --kernels onednn stops with one line and exit 2.
func TestOneDNNAbsent(t *testing.T) {
	empty, fake := t.TempDir(), t.TempDir()
	src := filepath.Join(fake, "fake.c")
	if err := os.WriteFile(src, []byte("int dnnl_version(void) { return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-o", filepath.Join(fake, onednn.Soname), src).CombinedOutput(); err != nil {
		t.Skipf("no C compiler to build a fake library: %v: %s", err, out)
	}
	train := []string{"train", "--model", "lenet5", "--data", "synthetic-images", "--shape", "1x28x28", "--samples", "64", "--classes", "3",
		"--epochs", "1", "--batch", "16", "--progress", "never", "--backend", "blas"}
	for dir, why := range map[string]string{empty: "cannot open shared object file", fake: "has no dnnl_engine_create"} {
		t.Setenv(onednn.DirEnv, dir)
		r := dml(t, 0, train...)
		if r.code != 0 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "dml: blas: libdnnl.so.2 did not load") ||
			!strings.Contains(r.stderr, why) || !strings.Contains(r.stderr, "names the folder it was looked for in") || strings.Contains(r.stdout, "onednn") {
			t.Errorf("%s=%s, auto: exit %d, stdout %q, stderr %q; want one notice line with %q and a run on dml's kernels", onednn.DirEnv, dir, r.code, r.stdout, r.stderr, why)
		}
		r = dml(t, 0, append(train, "--kernels", "onednn")...)
		if r.code != 2 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "--kernels onednn: libdnnl.so.2 did not load") || !strings.Contains(r.stderr, why) ||
			!strings.Contains(r.stderr, "unset "+onednn.DirEnv) {
			t.Errorf("%s=%s, --kernels onednn: exit %d, stderr %q; want exit 2 and one line with %q", onednn.DirEnv, dir, r.code, r.stderr, why)
		}
	}
}
