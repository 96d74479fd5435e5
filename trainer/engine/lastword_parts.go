package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/dml-project/dml/internal/regfile"
	"github.com/dml-project/dml/trainer/ckpt"
	"github.com/dml-project/dml/trainer/model"
)

// The servers' emergency parts (trainer/paramserver/lastword_ps.go writes them): with three
// servers or more each survivor writes what it holds as parts, and the
// resume joins the parts of the newest step whose parts hold every key.

// PartName is the file of rank's part of the checkpoint of steps.
func PartName(steps, rank int) string { return fmt.Sprintf("ckpt-s%09d.part-r%d.npz", steps, rank) }

// PartOf is the steps and rank a part's file name holds, and whether name
// is one.
func PartOf(name string) (steps, rank int, ok bool) {
	n, err := fmt.Sscanf(name, "ckpt-s%09d.part-r%d.npz", &steps, &rank)
	return steps, rank, err == nil && n == 2 && name == PartName(steps, rank)
}

// JoinParts makes a checkpoint of the servers' emergency parts in dir
// (p keys): for the newest step whose parts, all of one death (the same
// job and dead rank), hold every key, agreeing where they
// overlap, and which has no checkpoint yet. Then it removes every part in
// dir: they serve only the resume after the death that made them (parts
// left behind would be joined with a later attempt's). It returns the
// checkpoint it wrote ("": none) and what it found wrong.
func JoinParts(dir string, p int) (written string, problems []string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", nil
	}
	all, bySteps, problems := readParts(dir, ents, p)
	defer func() {
		for _, path := range all {
			os.Remove(path)
		}
	}()
	var order []int
	for steps := range bySteps {
		order = append(order, steps)
	}
	slices.Sort(order)
	slices.Reverse(order)
	for _, steps := range order {
		whole := filepath.Join(dir, ckpt.Name(steps))
		if _, err := os.Stat(whole); err == nil {
			continue
		}
		out, found := mergeParts(bySteps[steps], p, steps)
		problems = append(problems, found...)
		if out == nil {
			continue
		}
		b, err := out.Encode()
		if err == nil {
			err = ckpt.WriteAtomic(whole, b)
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("joining the parts of step %d: %v", steps, err))
			continue
		}
		return whole, problems
	}
	return "", problems
}

// partFile is a server's emergency part, read (partOf names it).
type partFile struct {
	path string
	rank int
	c    *checkpoint
}

// readParts reads the parts among dir's entries ents (all: every part
// file's path, to be removed), by step; a file that does not decode, or
// is no part of a p-key checkpoint of the step its name says, is a
// problem.
func readParts(dir string, ents []os.DirEntry, p int) (all []string, bySteps map[int][]partFile, problems []string) {
	bySteps = map[int][]partFile{}
	for _, e := range ents {
		steps, rank, ok := PartOf(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		all = append(all, path)
		b, err := regfile.ReadFile(path, maxPartBytes)
		var c *checkpoint
		if err == nil {
			c, err = ckpt.Decode(b)
		}
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", e.Name(), err))
			continue
		case c.Meta.Emergency == nil || !c.Meta.Emergency.Part || len(c.Params) != p || c.Meta.Position.Steps != steps:
			problems = append(problems, fmt.Sprintf("%s: not a part of a %d-key checkpoint of step %d", e.Name(), p, steps))
			continue
		}
		bySteps[steps] = append(bySteps[steps], partFile{path, rank, c})
	}
	return all, bySteps, problems
}

// mergeParts joins one step's parts of the newest death into a whole
// checkpoint of p keys, or nil where they do not hold every key or
// disagree where they overlap (a problem); a part of another job or
// death is left out (a problem).
func mergeParts(parts []partFile, p, steps int) (*checkpoint, []string) {
	var problems []string
	newest := parts[0].c.Meta
	for _, pf := range parts {
		if pf.c.Meta.Emergency.Time > newest.Emergency.Time {
			newest = pf.c.Meta
		}
	}
	same := func(m checkpointMeta) bool {
		a, b := m.Emergency, newest.Emergency
		return m.ConfigHash == newest.ConfigHash && m.Ranks == newest.Ranks && m.Workers == newest.Workers &&
			m.Servers == newest.Servers && a.DeadRank == b.DeadRank && len(m.Reshard) == len(newest.Reshard)
	}
	covered := make([]bool, p)
	n := 0
	out := &checkpoint{Meta: newest, State: model.State{Params: make([]float32, p)}}
	per := 0
	if o := parts[0].c.Opt; o != nil {
		per = len(o) / p
		out.Opt = make([]float32, per*p)
	}
	var from []int
	clash := ""
	for _, pf := range parts {
		if !same(pf.c.Meta) {
			problems = append(problems, fmt.Sprintf("%s: of another job or death than the newest parts of step %d", filepath.Base(pf.path), steps))
			continue
		}
		for _, r := range pf.c.Meta.Emergency.Held {
			for k := max(r[0], 0); k < min(r[1], p); k++ {
				st := func(c *checkpoint) []float32 {
					if per == 0 || len(c.Opt) != per*p {
						return nil
					}
					return c.Opt[per*k : per*(k+1)]
				}
				if covered[k] {
					if out.Params[k] != pf.c.Params[k] || !slices.Equal(st(out), st(pf.c)) {
						clash = fmt.Sprintf("parts of step %d disagree at key %d", steps, k)
					}
					continue
				}
				covered[k] = true
				n++
				out.Params[k] = pf.c.Params[k]
				if s := st(pf.c); s != nil {
					copy(out.Opt[per*k:per*(k+1)], s)
				}
			}
		}
		from = append(from, pf.rank)
	}
	switch {
	case clash != "":
		return nil, append(problems, clash)
	case n != p:
		return nil, problems
	}
	e := *newest.Emergency
	e.Part, e.Held, e.MergedFrom = false, nil, from
	out.Meta.Emergency = &e
	return out, problems
}

// maxPartBytes bounds a part file read (a model of 2^28 floats with
// Adam's state, and its metadata).
const maxPartBytes = 4 << 30

// ListEmergencyParts returns the ps servers' emergency parts in dir (a
// checkpoint in pieces that --resume joins).
func ListEmergencyParts(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if _, _, ok := PartOf(e.Name()); ok {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}
