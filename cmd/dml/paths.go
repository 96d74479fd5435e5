package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dml-project/dml/trainer"
	"github.com/dml-project/dml/trainer/data"
)

// namedPath is a file a flag names.
type namedPath struct{ flag, path string }

// what words an input for a message: "the --train file".
func (p namedPath) what() string {
	if p.flag == "--data-dir" {
		return "one of the dataset's files in --data-dir"
	}
	return "the " + p.flag + " file"
}

// checkOverwrites refuses, before any work, an output file that is also
// one of the inputs or another output: the same path, or the same file
// under another name (a link, a relative path). The run would overwrite
// what it reads (the training text replaced by the metrics), or one
// output would replace another (the weights by the timeline). Files not
// yet there can only clash by path.
func checkOverwrites(cmd string, outputs, inputs []namedPath) error {
	for i, o := range outputs {
		if o.path == "" {
			continue
		}
		for _, in := range inputs {
			if samePath(o.path, in.path) {
				return usageErr("%s: %s %s is also %s: the run would overwrite it; write to another file", cmd, o.flag, o.path, in.what())
			}
		}
		for _, other := range outputs[i+1:] {
			if samePath(o.path, other.path) {
				return usageErr("%s: %s and %s both name %s: one would overwrite the other; give each its own file", cmd, o.flag, other.flag, o.path)
			}
		}
	}
	return nil
}

// samePath says whether a and b name one file.
func samePath(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if ca, err1 := filepath.Abs(a); err1 == nil {
		if cb, err2 := filepath.Abs(b); err2 == nil && ca == cb {
			return true
		}
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// dataInputs are the files d's data are read from: --train and --test
// (idx: two files each), or the dataset's files in --data-dir.
func dataInputs(d trainer.DataConfig) []namedPath {
	var in []namedPath
	add := func(flag, list string, split bool) {
		if list == "" {
			return
		}
		paths := []string{list}
		if split {
			paths = strings.Split(list, ",")
		}
		for _, p := range paths {
			in = append(in, namedPath{flag, p})
		}
	}
	inDir := func(names ...string) {
		dir := d.Dir
		if dir == "" && d.Name == "fashion-mnist" {
			dir = data.DefaultFashionMNISTDir
		}
		for _, n := range names {
			in = append(in, namedPath{"--data-dir", filepath.Join(dir, n)})
		}
	}
	switch d.Name {
	case "idx", "libsvm", "text":
		add("--train", d.Train, d.Name == "idx")
		add("--test", d.Test, d.Name == "idx")
	case "fashion-mnist":
		for _, f := range data.FashionMNISTFiles {
			inDir(f, f+".gz")
		}
	case "cifar10":
		inDir(append(slices.Clone(data.CIFARTrainFiles), data.CIFARTestFile)...)
	case "cifar100", "cifar100-coarse":
		inDir(data.CIFAR100TrainFile, data.CIFAR100TestFile)
	}
	return in
}
