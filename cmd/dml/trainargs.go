package main

import (
	"flag"
	"io"
	"slices"

	"github.com/dml-project/dml/trainer"
)

// trainArgs is a dml train command line parsed with dml train's own flag
// set (registerAllTrainFlags, resumeArgs and joinSpaced as cmdTrain
// parses), for the commands that start dml train (dml launch): they read
// its settings as train will see them and change flags through it, then
// re-emit the line, instead of editing the text. Each flag the line gave
// is kept as the text it was given, in the line's order, and re-emitted
// as --name=text.
type trainArgs struct {
	fs    *flag.FlagSet
	cfg   trainer.Config // as the flags left it (not settled: no Validate)
	given []givenFlag
}

type givenFlag struct{ name, text string }

// recorded wraps a flag's Value so that parsing records the text given.
type recorded struct {
	flag.Value
	name string
	t    *trainArgs
}

func (r recorded) Set(s string) error {
	if err := r.Value.Set(s); err != nil {
		return err
	}
	r.t.given = append(r.t.given, givenFlag{r.name, s})
	return nil
}

// IsBoolFlag and takesSpaced pass the wrapped flag's own through, so
// that "--shuffle", "--resume" and "--overlap auto" parse as in dml
// train.
func (r recorded) IsBoolFlag() bool {
	b, ok := r.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func (r recorded) takesSpaced(word string) bool {
	s, ok := r.Value.(spacedValue)
	return ok && s.takesSpaced(word)
}

// parseTrainArgs parses args (after "train"): an error is dml train's
// own for the same line.
func parseTrainArgs(args []string) (*trainArgs, error) {
	t := &trainArgs{cfg: trainer.DefaultConfig()}
	var cf commonFlags
	t.fs = newFlags("train", trainUsage, io.Discard)
	registerAllTrainFlags(t.fs, &t.cfg, &cf, io.Discard)
	t.fs.VisitAll(func(f *flag.Flag) { f.Value = recorded{f.Value, f.Name, t} })
	if err := parse(t.fs, resumeArgs(args)); err != nil {
		return nil, err
	}
	return t, nil
}

// value is the text the line last gave flag name, and whether it gave
// it.
func (t *trainArgs) value(name string) (string, bool) {
	for i := len(t.given) - 1; i >= 0; i-- {
		if t.given[i].name == name {
			return t.given[i].text, true
		}
	}
	return "", false
}

// has reports whether the line gave flag name.
func (t *trainArgs) has(name string) bool {
	_, ok := t.value(name)
	return ok
}

// with returns a copy in which flag name is text (the line's own, if it
// gave one, dropped).
func (t *trainArgs) with(name, text string) *trainArgs {
	u := t.without(name)
	u.given = append(u.given, givenFlag{name, text})
	return u
}

// without returns a copy without flag name.
func (t *trainArgs) without(name string) *trainArgs {
	u := *t
	u.given = slices.DeleteFunc(slices.Clone(t.given), func(g givenFlag) bool { return g.name == name })
	return &u
}

// args is the command line: train, then --name=text for each flag given.
func (t *trainArgs) args() []string {
	out := []string{"train"}
	for _, g := range t.given {
		out = append(out, "--"+g.name+"="+g.text)
	}
	return out
}
