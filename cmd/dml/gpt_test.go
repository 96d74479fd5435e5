package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// writeText writes a small structured text (about n bytes) to dir/name.
func writeText(t *testing.T, dir, name string, n int, seed uint64) string {
	t.Helper()
	words := []string{"alpha", "beta", "gamma", "delta", "rank", "ring"}
	r := rand.New(rand.NewPCG(seed, 3))
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, "the %s %s.\n", words[r.IntN(len(words))], words[r.IntN(len(words))])
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGPTText: dml train --model gpt --data text trains under mpirun and
// prints tokens/s, the test loss and perplexity; --save writes nanoGPT's
// keys (lm_head.weight too), which dml eval reads back, giving the
// accuracy and loss the last epoch printed.
func TestGPTText(t *testing.T) {
	dir := t.TempDir()
	train, test := writeText(t, dir, "train.txt", 4000, 1), writeText(t, dir, "test.txt", 800, 2)
	w := filepath.Join(dir, "gpt.npz")
	r := dml(t, 2, "train", "--model", "gpt", "--layers", "1", "--heads", "2", "--embed", "16", "--seq-len", "16",
		"--data", "text", "--train", train, "--test", test, "--batch", "8", "--epochs", "2", "--optimizer", "adamw", "--lr", "3e-3",
		"--backend", "cpu", "--save", w)
	if r.code != 0 || !strings.Contains(r.stdout, "training gpt 16×1: transformer.wte 256×16") || !strings.Contains(r.stdout, "tokens/s  test_loss") ||
		!strings.Contains(r.stdout, "lm_head 256 (tied to transformer.wte)") {
		t.Fatalf("train: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	var acc, loss, ppl float64
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, "epoch   2") {
			f := strings.Fields(line)
			fmt.Sscan(f[7], &acc)
			for i := range f {
				switch f[i] {
				case "test_loss":
					fmt.Sscan(f[i+1], &loss)
				case "ppl":
					fmt.Sscan(f[i+1], &ppl)
				}
			}
		}
	}
	if !(loss > 0 && loss < 3.5) || !(ppl > 1) {
		t.Fatalf("epoch 2: test loss %v, ppl %v:\n%s", loss, ppl, r.stdout)
	}
	e := dml(t, 0, "eval", "--model", "gpt", "--heads", "2", "--data", "text", "--train", train, "--test", test, "--weights", w, "--backend", "cpu")
	want := fmt.Sprintf("accuracy %.4f  loss %.4f (per token: perplexity", acc, loss)
	if e.code != 0 || !strings.Contains(e.stdout, want) {
		t.Errorf("eval: exit %d, stdout %q, want %q\nstderr %s", e.code, e.stdout, want, e.stderr)
	}
}

// TestGPTRefuses: text and gpt settings that cannot work stop with one
// line and exit 2, before training.
func TestGPTRefuses(t *testing.T) {
	dir := t.TempDir()
	ok := writeText(t, dir, "ok.txt", 2000, 1)
	empty := filepath.Join(dir, "empty.txt")
	os.WriteFile(empty, nil, 0o644)
	short := filepath.Join(dir, "short.txt")
	os.WriteFile(short, []byte("tiny"), 0o644)
	big := writeText(t, dir, "big.txt", 1200000, 4)
	gpt := []string{"train", "--model", "gpt", "--layers", "1", "--heads", "2", "--embed", "16", "--seq-len", "16", "--data", "text", "--backend", "cpu"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(gpt, "--train", empty), "empty"},
		{append(gpt, "--train", short), "shorter than one window of 17"},
		{append(gpt, "--train", dir), "folder"},
		{append(gpt, "--train", ok, "--heads", "3"), "--heads 3 does not divide the width 16"},
		{append(gpt, "--train", ok, "--seq-len", "100000"), "--seq-len 100000 must be in 1..16384"},
		{[]string{"train", "--model", "gpt", "--data", "synthetic"}, "gpt trains on a token sequence"},
		{[]string{"train", "--model", "mlp", "--data", "text", "--train", ok}, "on a token sequence"},
		{[]string{"train", "--model", "lenet5", "--data", "text", "--train", ok}, "starts with an embedding"},
		// Attention's batch × heads × seq² among the rest: 64 × 4 × 16384²
		// floats per block (over a TB in all), named before anything is
		// allocated.
		{[]string{"train", "--model", "gpt", "--data", "text", "--train", big, "--seq-len", "16384", "--batch", "64"}, "lower --batch or --seq-len"},
		// Sizes from the flags alone, before a block is laid out (a
		// million blocks took gigabytes and a minute to lay out first).
		{append(gpt, "--train", ok, "--layers", "2000000000000"), "more than 2^40: lower --layers or --embed"},
		{append(gpt, "--train", ok, "--layers", "1000000"), "gpt of 1000000 blocks 16 wide"},
		{[]string{"train", "--model", "gpt", "--data", "text", "--train", ok, "--embed", "65536", "--heads", "1", "--layers", "1"}, "lower --layers or --embed"},
		// Tokens are ids: a network that reads them as values, or an
		// embedding with fewer rows than the ids, is refused up front.
		{[]string{"train", "--data", "text", "--train", ok, "--seq-len", "16", "--model-file", netFile(t, dir, "lin.yaml", "{kind: linear, name: head, out: 256}")}, "starts with an embedding"},
		{[]string{"train", "--data", "text", "--train", ok, "--seq-len", "16", "--model-file", netFile(t, dir, "few.yaml", "{kind: embedding, name: wte, rows: 100, out: 8}", "{kind: linear, name: head, out: 256}")}, "rows 100, fewer than the 256 token ids"},
		{[]string{"eval", "--data", "text", "--train", ok, "--seq-len", "16", "--weights", mlpWeights(t, dir)}, "holds an MLP's weights"},
		{append(gpt, "--train", ok, "--seq-len", "1999"), "the training set has 1 sample: too few to hold a test set out (pass --test, or a shorter --seq-len)"},
		{[]string{"train", "--model", "mlp", "--data", "synthetic", "--heads", "3"}, "--heads 3 is the gpt's (--model gpt); model mlp has no such setting"},
	} {
		r := dml(t, 0, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line saying %q", c.args[1:], r.code, r.stderr, c.want)
		}
	}
}

// TestGPTOneStepEqualPyTorch: one SGD step of a two-block GPT from the
// same weights and windows gives the weights of nanoGPT's module's step
// (bench/torch/gpt.py, loaded strict, head tied) in float64, within
// float32 rounding (bench/torch/one_step.py).
func TestGPTOneStepEqualPyTorch(t *testing.T) {
	py := "/usr/bin/python3"
	if exec.Command(py, "-c", "import torch").Run() != nil {
		t.Skip("no python3-torch: the PyTorch step cannot be computed")
	}
	dir := t.TempDir()
	text := writeText(t, dir, "t.txt", 3000, 5)
	common := []string{"train", "--model", "gpt", "--layers", "2", "--heads", "2", "--embed", "16", "--seq-len", "16", "--data", "text", "--train", text,
		"--batch", "4", "--shuffle=false", "--optimizer", "sgd", "--lr", "0.1", "--epochs", "1", "--kernels", "dml"}
	init, after := filepath.Join(dir, "init.npz"), filepath.Join(dir, "after.npz")
	for _, run := range []struct{ steps, save string }{{"0", init}, {"1", after}} {
		if r := dml(t, 0, append(common, "--max-steps", run.steps, "--save", run.save)...); r.code != 0 {
			t.Fatalf("train: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
	}
	out, err := exec.Command(py, "../../bench/torch/one_step.py", "--model", "gpt", "--text", text, "--seq-len", "16", "--heads", "2",
		"--batch", "4", "--lr", "0.1", init, after).CombinedOutput()
	if err != nil {
		t.Fatalf("one_step.py: %v: %s", err, out)
	}
	t.Logf("%s", out)
}

// netFile writes a model file of the given layers into dir.
func netFile(t *testing.T, dir, name string, layers ...string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("layers:\n  - "+strings.Join(layers, "\n  - ")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// mlpWeights saves an MLP's weights of 17 inputs (a window of 16 tokens
// and its target, if read as values) into dir.
func mlpWeights(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "mlp17.npz")
	if r := dml(t, 0, "train", "--data", "synthetic", "--features", "17", "--samples", "100", "--hidden", "4", "--epochs", "1", "--save", p); r.code != 0 {
		t.Fatalf("saving an MLP: exit %d: %s", r.code, r.stderr)
	}
	return p
}

// TestEvalTextTestOnly: dml eval scores a text's --test windows without a
// --train file (it read, and demanded, one it did not score).
func TestEvalTextTestOnly(t *testing.T) {
	dir := t.TempDir()
	train, test := writeText(t, dir, "train.txt", 3000, 1), writeText(t, dir, "test.txt", 17*40, 2)
	w := filepath.Join(dir, "w.npz")
	if r := dml(t, 0, "train", "--model", "gpt", "--layers", "1", "--heads", "2", "--embed", "16", "--seq-len", "16", "--data", "text", "--train", train, "--max-steps", "2", "--save", w); r.code != 0 {
		t.Fatalf("train: exit %d: %s", r.code, r.stderr)
	}
	r := dml(t, 0, "eval", "--model", "gpt", "--heads", "2", "--data", "text", "--test", test, "--weights", w)
	fi, err := os.Stat(test)
	if err != nil {
		t.Fatal(err)
	}
	// Windows of 17 tokens, 16 apart.
	if want := fmt.Sprintf("on %d test samples", (fi.Size()-1)/16); r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("eval with --test only: exit %d, stdout %q, stderr %q; want the test file's windows scored (%s)", r.code, r.stdout, r.stderr, want)
	}
}
