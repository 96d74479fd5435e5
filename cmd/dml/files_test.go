package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dml-project/dml/collectives/mpi"
)

// TestSaveTargetCheckedFirst: an unusable --save or --metrics target is
// refused at start-up with exit 2, not after the training (the bug: a folder
// as the target was noticed only when the final weights were written).
func TestSaveTargetCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	// Enough epochs that a run reaching the training would take minutes.
	long := []string{"train", "--data", "synthetic", "--samples", "200000", "--epochs", "1000", "--hidden", "256"}
	// Devices and FIFOs are made in the test's folder (a symlink stands
	// for /dev/null itself): a regression replaces only those.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	null := filepath.Join(dir, "null-link")
	if err := os.Symlink("/dev/null", null); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ flag, path, want string }{
		{"--save", dir, "--save: " + dir + " is a folder, not a regular file"},
		{"--metrics", dir, "--metrics: " + dir + " is a folder, not a regular file"},
		{"--save", filepath.Join(file, "w.npz"), file + " is not a folder"},
		{"--save", fifo, "--save: " + fifo + " is a FIFO, not a regular file"},
		{"--save", null, "--save: " + null + " is a character device, not a regular file"},
		{"--metrics", fifo, "--metrics: " + fifo + " is a FIFO, not a regular file"},
		{"--timeline", null, "--timeline: " + null + " is a character device, not a regular file"},
		{"--resume", fifo, "--resume: " + fifo + " is a FIFO, not a regular file"},
	}
	dev := filepath.Join(dir, "null")
	if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|3); err == nil {
		cases = append(cases, struct{ flag, path, want string }{"--save", dev, "--save: " + dev + " is a character device, not a regular file"})
	}
	for _, tc := range cases {
		before, _ := os.Lstat(tc.path)
		r := dml(t, 0, append(long, tc.flag, tc.path)...)
		// Refused before the training: its first line never came.
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stdout, "training ") {
			t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want exit 2 before training and %q", tc.flag, tc.path, r.code, r.stdout, r.stderr, tc.want)
		}
		if before == nil {
			continue
		}
		if after, err := os.Lstat(tc.path); err != nil || after.Mode() != before.Mode() {
			t.Errorf("%s %s was %v, is now %v (%v)", tc.flag, tc.path, before.Mode(), after.Mode(), err)
		}
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		os.Mkdir(ro, 0o555)
		r := dml(t, 0, append(long, "--save", filepath.Join(ro, "w.npz"))...)
		if r.code != 2 || !strings.Contains(r.stderr, "cannot create a file in "+ro) {
			t.Errorf("read-only folder: exit %d, stderr %q", r.code, r.stderr)
		}
	}
}

// TestHostileInputFiles: tiny files that used to cost gigabytes or a panic
// end with one line from dml and exit 1.
func TestHostileInputFiles(t *testing.T) {
	dir := t.TempDir()
	svm := filepath.Join(dir, "huge-index.svm")
	os.WriteFile(svm, []byte("1 1073741824:1\n"), 0o644)
	npz := filepath.Join(dir, "junk.npz")
	os.WriteFile(npz, []byte("PK\x03\x04 not really a zip"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--model", "logreg", "--data", "libsvm", "--train", svm}, "raise the limit (--max-features 1073741824)"},
		{[]string{"eval", "--weights", npz, "--data", "synthetic"}, "not an .npz archive"},
		{[]string{"eval", "--weights", dir, "--data", "synthetic"}, "is a folder"},
	} {
		r := dml(t, 0, tc.args...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 1 || len(lines) != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("dml %s: exit %d, stderr %q; want exit 1 and one line with %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.want)
		}
	}
}

// TestEvalFashionMNIST: weights trained on Fashion-MNIST (784 inputs) and
// saved are read back exactly: dml eval, alone and under mpirun (each rank
// reading only its rows), prints the accuracy training reported. The old
// .npz reader returned garbage past the first 32 KB of a deflated entry:
// accuracy 0.1000, loss NaN, exit 0.
func TestEvalFashionMNIST(t *testing.T) {
	if _, err := os.Stat("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"); err != nil {
		t.Skip("Fashion-MNIST is not installed (make deps installs dataset-fashion-mnist)")
	}
	w := filepath.Join(t.TempDir(), "w.npz")
	r := dml(t, 2, "train", "--data", "fashion-mnist", "--hidden", "32", "--max-steps", "60", "--backend", "cpu", "--save", w)
	i := strings.Index(r.stdout, "test accuracy ")
	if r.code != 0 || i < 0 {
		t.Fatalf("train: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	acc := r.stdout[i+len("test accuracy ") : i+len("test accuracy 0.0000")]
	for _, np := range []int{0, 2} {
		r := dml(t, np, "eval", "--weights", w, "--data", "fashion-mnist", "--backend", "cpu")
		if r.code != 0 || !strings.Contains(r.stdout, "on 10000 test samples: accuracy "+acc) {
			t.Errorf("eval (np %d): exit %d, stdout %q, stderr %q; want accuracy %s", np, r.code, r.stdout, r.stderr, acc)
		}
	}
}

// TestDifferentIDXPerRank: ranks read only their rows of IDX data now, and
// still notice at start-up that one was given other files (the data check
// hashes the files as stored): train and eval refuse, naming the rank.
func TestDifferentIDXPerRank(t *testing.T) {
	dir := t.TempDir()
	idx := func(name string, dims []int, b []byte) string {
		h := []byte{0, 0, 8, byte(len(dims))}
		for _, d := range dims {
			h = append(h, byte(d>>24), byte(d>>16), byte(d>>8), byte(d))
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, append(h, b...), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	px := make([]byte, 100*4*4)
	for i := range px {
		px[i] = byte(i * 7)
	}
	lab := make([]byte, 100)
	for i := range lab {
		lab[i] = byte(i % 3)
	}
	labels := idx("labels", []int{100}, lab)
	a := idx("a", []int{100, 4, 4}, px)
	px[55]++
	b := idx("b", []int{100, 4, 4}, px)
	run := func(args ...string) func(img string) []string {
		return func(img string) []string {
			return append(append([]string{}, args...), "--data", "idx", "--train", img+","+labels)
		}
	}
	w := filepath.Join(dir, "w.npz")
	if r := dml(t, 2, run("train", "--model", "softmax", "--epochs", "1", "--save", w)(a)...); r.code != 0 {
		t.Fatalf("same files: exit %d: %s", r.code, r.stderr)
	}
	for name, args := range map[string]func(string) []string{
		"train": run("train", "--model", "softmax", "--epochs", "1", "--timeout", "100s"),
		"eval":  run("eval", "--weights", w),
	} {
		argv := mpi.MpirunArgs(1, dmlBin, args(a)...)
		r := runCmd(t, append(append(argv, ":", "-np", "1", dmlBin), args(b)...))
		if r.code == 0 || !strings.Contains(r.stderr, "dml: rank 0: rank 1 (") || !strings.Contains(r.stderr, "differ from rank 0's") {
			t.Errorf("%s with another image file on rank 1: exit %d, stderr %q", name, r.code, r.stderr)
		}
	}
}

// TestClassLabelsBelongToTheModel: a model trained on LIBSVM labels 1, 2,
// 3 keeps that mapping with its weights, so that evaluating it on a file
// that holds only label 3 scores as it should (it scored 0: the file's
// own labels were mapped to classes again), a label it never saw is an
// error, and --classes that the data does not have is refused, saying
// what was inferred from what.
func TestClassLabelsBelongToTheModel(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, labels ...int) string {
		var b strings.Builder
		for i := range 300 {
			l := labels[i%len(labels)]
			fmt.Fprintf(&b, "%d %d:5 4:0.%d\n", l, l, i%10) // feature l marks label l
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	train, only3, with9 := write("train.svm", 1, 2, 3), write("only3.svm", 3), write("with9.svm", 3, 9)
	w := filepath.Join(dir, "w.npz")
	r := dml(t, 0, "train", "--data", "libsvm", "--train", train, "--model", "softmax", "--epochs", "3", "--lr", "0.5", "--save", w, "--progress", "never")
	if r.code != 0 || !strings.Contains(r.stdout, "classes: 3, from labels 1 2 3 of "+train) {
		t.Fatalf("train: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if r := dml(t, 0, "eval", "--weights", w, "--data", "libsvm", "--train", only3, "--test", only3); r.code != 0 || !strings.Contains(r.stdout, "accuracy 1.0000") {
		t.Errorf("eval on a file of label 3 only: exit %d, stdout %q, stderr %q; want accuracy 1", r.code, r.stdout, r.stderr)
	}
	if r := dml(t, 0, "eval", "--weights", w, "--data", "libsvm", "--train", with9, "--test", with9); r.code == 0 || !strings.Contains(r.stderr, "label 9 is not one of the given labels [1 2 3]") {
		t.Errorf("eval with a label the model never saw: exit %d, stderr %q", r.code, r.stderr)
	}
	r = dml(t, 0, "train", "--data", "libsvm", "--train", train, "--classes", "4", "--epochs", "1")
	if r.code != 2 || !strings.Contains(r.stderr, "--classes 4: the data has 3 classes (labels 1 2 3 of "+train+", as classes 0 … 2)") {
		t.Errorf("--classes 4 on 3-class data: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestOutputsOverwriteNothing: an output that names an input (the training
// text, the test file, the model file, the weights evaluated, a dataset
// file, by its path or through a link) or another output is refused with
// exit 2 before any work, and every file is left as it was (the bug: the
// training text replaced by the metrics, the weights by the timeline).
func TestOutputsOverwriteNothing(t *testing.T) {
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	text := strings.Repeat("the quick brown fox jumps over the lazy dog; ", 200)
	for _, f := range []string{"train.txt", "test.txt"} {
		if err := os.WriteFile(at(f), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(at("net.yaml"), []byte("layers:\n  - {kind: embedding, name: wte, rows: 256, out: 8}\n  - {kind: linear, name: head, out: 256}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(at("test.txt"), at("link.txt")); err != nil {
		t.Fatal(err)
	}
	gpt := []string{"--model", "gpt", "--layers", "1", "--heads", "2", "--embed", "8", "--seq-len", "8", "--data", "text",
		"--train", at("train.txt"), "--test", at("test.txt"), "--epochs", "1", "--max-steps", "1"}
	netf := []string{"--model-file", at("net.yaml"), "--seq-len", "8", "--data", "text", "--train", at("train.txt"), "--epochs", "1", "--max-steps", "1"}
	if r := dml(t, 0, append([]string{"train", "--save", at("w.npz")}, gpt...)...); r.code != 0 {
		t.Fatalf("training the weights: exit %d: %s", r.code, r.stderr)
	}
	fashion := filepath.Join(dir, "fmnist")
	os.Mkdir(fashion, 0o755)
	if err := os.WriteFile(filepath.Join(fashion, "train-images-idx3-ubyte.gz"), []byte("images"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{append([]string{"train", "--metrics", at("train.txt")}, gpt...), "--metrics " + at("train.txt") + " is also the --train file"},
		{append([]string{"train", "--save", at("link.txt")}, gpt...), "is also the --test file"},
		{append([]string{"train", "--timeline", at("test.txt")}, gpt...), "is also the --test file"},
		{append([]string{"train", "--save", at("x.npz"), "--timeline", dir + "/./x.npz"}, gpt...), "--save and --timeline both name"},
		{append([]string{"train", "--save", at("m.json"), "--metrics", at("m.json")}, gpt...), "--save and --metrics both name"},
		{append([]string{"train", "--metrics", at("net.yaml")}, netf...), "is also the --model-file file"},
		{[]string{"eval", "--model", "gpt", "--heads", "2", "--data", "text", "--train", at("train.txt"), "--test", at("test.txt"), "--weights", at("w.npz"), "--timeline", at("w.npz")}, "--timeline " + at("w.npz") + " is also the --weights file"},
		{[]string{"train", "--data", "fashion-mnist", "--data-dir", fashion, "--save", filepath.Join(fashion, "train-images-idx3-ubyte.gz")}, "is also one of the dataset's files in --data-dir"},
	}
	sums := map[string]string{}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	files = append(files, filepath.Join(fashion, "train-images-idx3-ubyte.gz"))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			sums[f] = string(b)
		}
	}
	for _, tc := range cases {
		r := dml(t, 0, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	for f, before := range sums {
		if b, err := os.ReadFile(f); err != nil || string(b) != before {
			t.Errorf("%s changed (%v)", f, err)
		}
	}
	for _, f := range []string{"x.npz", "m.json"} {
		if _, err := os.Stat(at(f)); err == nil {
			t.Errorf("%s was written", f)
		}
	}
}
