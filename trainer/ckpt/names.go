package ckpt

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/dml-project/dml/trainer/atomicfile"
)

// WriteAtomic writes data to path so that path holds either its old
// contents or all of data, whatever happens (atomicfile.Write).
func WriteAtomic(path string, data []byte) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Name is the file name of the checkpoint after `steps` steps.
func Name(steps int) string { return fmt.Sprintf("ckpt-s%09d.npz", steps) }

// Steps is the step count a checkpoint's file name holds, and whether
// name is one (ckpt-sNNN.npz).
func Steps(name string) (int, bool) {
	digits, hasPrefix := strings.CutPrefix(name, "ckpt-s")
	digits, hasSuffix := strings.CutSuffix(digits, ".npz")
	if !hasPrefix || !hasSuffix {
		return 0, false
	}
	s, err := strconv.Atoi(digits)
	return s, err == nil
}

// IsName reports whether name is a checkpoint's file name.
func IsName(name string) bool { _, ok := Steps(name); return ok }

// List returns the checkpoint files in dir, newest (most steps) first.
func List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type named struct {
		path  string
		steps int
	}
	var found []named
	for _, e := range ents {
		n := e.Name()
		s, ok := Steps(n)
		if e.IsDir() || !ok {
			continue
		}
		found = append(found, named{filepath.Join(dir, n), s})
	}
	slices.SortFunc(found, func(a, b named) int { return b.steps - a.steps })
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f.path
	}
	return out, nil
}
