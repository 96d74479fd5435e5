package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// The flag set every command starts from: its help, its parsing (a value
// after a space or an =, for flags that take words).

// helps holds each FlagSet's help printer: the flag package would call
// fs.Usage on every parse error too, and a mistyped flag should get one
// line, not the whole help.
var helps = map[*flag.FlagSet]func(){}

// newFlags returns a FlagSet whose help (synopsis and flags) goes to stdout
// on --help only; parse turns its errors into usage errors.
func newFlags(name, synopsis string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	helps[fs] = func() {
		fmt.Fprintf(stdout, "%s\n\nFlags:\n", synopsis)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// parse parses args, mapping errors to usage errors (and --help to flag.ErrHelp).
// A boolean flag takes its value after a space too ("--shuffle false"), as
// the other flags do (joinSpaced).
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(joinSpaced(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			helps[fs]()
			return err
		}
		return usageErr("%s: %v (see 'dml %s --help')", fs.Name(), err, fs.Name())
	}
	if fs.NArg() > 0 {
		return usageErr("%s: unexpected argument %q (see 'dml %s --help')", fs.Name(), fs.Arg(0), fs.Name())
	}
	return nil
}

// spacedValue is implemented by a boolean flag (one that stands alone, as
// --overlap does) whose values other than true and false may also follow
// it after a space ("--overlap auto").
type spacedValue interface {
	takesSpaced(word string) bool
}

// joinSpaced rewrites "--name VALUE" as "--name=VALUE" where --name is one
// of fs's boolean flags and VALUE one of its values (true or false, or what
// the flag's takesSpaced accepts): package flag reads a boolean flag's
// value only after "=", so "--shuffle false" — as the other flags are
// written — would end the flags at "false". dml takes no positional
// arguments, so a word after a boolean flag is never one.
func joinSpaced(fs *flag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		isFlag := strings.HasPrefix(a, "-")
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-") // -name or --name
		if f := fs.Lookup(name); isFlag && !strings.Contains(name, "=") && f != nil && i+1 < len(args) {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				next := args[i+1]
				sp, hasOwn := f.Value.(spacedValue)
				if next == "true" || next == "false" || (hasOwn && sp.takesSpaced(next)) {
					out = append(out, a+"="+next)
					i++
					continue
				}
			}
		}
		out = append(out, a)
	}
	return out
}
