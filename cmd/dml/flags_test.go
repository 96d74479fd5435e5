package main

import (
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dml-project/dml/trainer"
)

// TestFlagNamesMatch: every trainer.ConfigError field the CLI maps names a
// real Config field and a flag that `dml train` registers.
func TestFlagNamesMatch(t *testing.T) {
	cfg := trainer.DefaultConfig()
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	registerTrainFlags(fs, &cfg)
	for field, name := range flagNames() {
		typ := reflect.TypeFor[trainer.Config]()
		for _, part := range strings.Split(field, ".") {
			f, ok := typ.FieldByName(part)
			if !ok {
				t.Errorf("%s: no such Config field", field)
				break
			}
			typ = f.Type
		}
		if fs.Lookup(strings.TrimPrefix(name, "--")) == nil {
			t.Errorf("%s maps to %s, which dml train does not have", field, name)
		}
	}
	// A configuration mismatch between ranks names the flag of every
	// setting the ranks compare.
	for _, field := range trainer.ComparedFields() {
		if _, ok := flagNames()[field]; !ok {
			t.Errorf("ranks compare Config field %s, but no flag's Value points at it (flagtable.go)", field)
		}
	}
	// Read off the flags' targets (flagtable.go): a flag writing two
	// fields (--staleness-range), a whole struct (--straggle), one held by
	// pointer (--overlap), an indirect one (--model-file).
	for field, flag := range map[string]string{"Opt.LR": "--lr", "PS.StalenessHigh": "--staleness-range", "Straggle.Factor": "--straggle",
		"Hidden": "--hidden", "Opt.Kind": "--optimizer", "Overlap": "--overlap", "Net": "--model-file", "GPT.Heads": "--heads", "Data.SeqLen": "--seq-len"} {
		if flagNames()[field] != flag {
			t.Errorf("%s is worded %q, want %s", field, flagNames()[field], flag)
		}
	}
	// A bad setting found inside the world reads as its flag.
	cfg.Sync, cfg.PS.Servers = trainer.SyncPS, 4
	if got := flagError(cfg.ValidateWorld(2)); !strings.HasPrefix(got, "--servers 4 needs at least 5 ranks") {
		t.Errorf("got %q", got)
	}
}

// TestSpareCoreForComm: --overlap auto turns the communication goroutine on
// only where a rank has a core for it beside its BLAS threads.
func TestSpareCoreForComm(t *testing.T) {
	for _, c := range []struct {
		cpus, online, local, threads int
		want                         bool
	}{
		{1, 2, 2, 1, false},   // mpirun --bind-to core, 2 ranks on 2 cores
		{2, 2, 2, 1, false},   // unbound, 2 ranks sharing 2 cores
		{2, 2, 4, 1, false},   // 4 ranks on 2 cores, unbound
		{1, 2, 4, 1, false},   // 4 ranks on 2 cores, bound
		{16, 16, 2, 1, true},  // 2 ranks on a 16-core node
		{8, 16, 2, 1, true},   // the same, bound to a socket each
		{16, 16, 8, 1, true},  // 8 ranks × (1 + 1) = 16
		{16, 16, 8, 2, false}, // 8 ranks × (2 + 1) > 16
		{2, 2, 1, 1, true},    // one rank alone on 2 cores
	} {
		if got := spareCoreForComm(c.cpus, c.online, c.local, c.threads); got != c.want {
			t.Errorf("%d of %d cpus, %d local ranks, %d threads: %v, want %v", c.cpus, c.online, c.local, c.threads, got, c.want)
		}
	}
}

// TestJoinSpaced: a boolean flag takes its value after a space as well as
// after "=" ("--shuffle false" was refused as an unexpected argument),
// --overlap also "auto"; other words after a boolean flag are left alone,
// and nothing after "--" is rewritten.
func TestJoinSpaced(t *testing.T) {
	cfg := trainer.DefaultConfig()
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	registerTrainFlags(fs, &cfg)
	for _, tc := range []struct{ in, want string }{
		{"--shuffle false", "--shuffle=false"},
		{"-shuffle true --epochs 3", "-shuffle=true --epochs 3"},
		{"--shuffle=false", "--shuffle=false"},
		{"--overlap auto --overlap false", "--overlap=auto --overlap=false"},
		{"--shuffle auto", "--shuffle auto"},
		{"--shuffle --epochs 3", "--shuffle --epochs 3"},
		{"--epochs false", "--epochs false"},
		{"--nosuch false", "--nosuch false"},
		{"-- --shuffle false", "-- --shuffle false"},
		{"--shuffle", "--shuffle"},
	} {
		if got := strings.Join(joinSpaced(fs, strings.Fields(tc.in)), " "); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
	if err := parse(fs, strings.Fields("--shuffle false --overlap false")); err != nil || cfg.Shuffle || cfg.Overlap {
		t.Errorf("--shuffle false --overlap false: err %v, shuffle %v, overlap %v", err, cfg.Shuffle, cfg.Overlap)
	}
}

var updateDocs = flag.Bool("update", false, "rewrite docs/flags.md from the commands' --help (make docs)")

// flagCommands are the commands whose --help the flag reference holds.
var flagCommands = [][]string{{"train"}, {"eval"}, {"bench", "allreduce"}, {"bench", "consistency"}, {"bench", "ops"}, {"bench", "ps"}, {"bench", "sweep"}, {"launch"}, {"devices"}}

// flagReference is docs/flags.md as the commands' --help print it.
func flagReference(t *testing.T) string {
	var b strings.Builder
	b.WriteString("# Flag reference\n\nGenerated from each command's `--help` by `make docs`; `TestFlagReference` fails when it differs.\n")
	for _, cmd := range flagCommands {
		var out, errb strings.Builder
		if code := run(append(slices.Clone(cmd), "--help"), &out, &errb); code != 0 {
			t.Fatalf("dml %s --help: exit %d: %s", strings.Join(cmd, " "), code, errb.String())
		}
		fmt.Fprintf(&b, "\n## dml %s\n\n```text\n%s```\n", strings.Join(cmd, " "), out.String())
	}
	return b.String()
}

// TestFlagReference: docs/flags.md is what the commands' --help say (the
// README's hand-kept flag tables drifted from them); `make docs` rewrites it.
func TestFlagReference(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "flags.md")
	want := flagReference(t)
	if *updateDocs {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Fatalf("%s is not what --help prints (%v): run `make docs`", path, err)
	}
}

// TestDocLinks: every relative link in README.md and docs/ names a file
// or folder that exists.
func TestDocLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append(docs, filepath.Join(root, "README.md"))
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(doc), target)); err != nil {
				t.Errorf("%s links to %s: %v", doc, m[1], err)
			}
		}
	}
}

// configBad says whether fn, called in folder dir, makes a *ConfigError:
// config.Bad in trainer and its strategies, Bad inside trainer/config,
// bad inside trainer/engine.
func configBad(fn ast.Expr, dir string) bool {
	trainer := filepath.Join("..", "..", "trainer")
	switch fn := fn.(type) {
	case *ast.Ident:
		return fn.Name == "Bad" && dir == filepath.Join(trainer, "config") ||
			fn.Name == "bad" && dir == filepath.Join(trainer, "engine")
	case *ast.SelectorExpr:
		x, ok := fn.X.(*ast.Ident)
		return ok && x.Name == "config" && fn.Sel.Name == "Bad" && strings.HasPrefix(dir, trainer)
	}
	return false
}

// TestTrainerSettingsHaveFlags: every setting packages trainer and
// trainer/config name in a message (their string literals: "lower
// Config.Opt.LR", "Checkpointing.Dir: writing …", and the fields of their
// bad("Field", …) errors) is worded as the flag that sets it, and the
// wording keeps the error's chain.
func TestTrainerSettingsHaveFlags(t *testing.T) {
	// bad(…) fields named in messages that speak for themselves: the
	// checkpoint settings (their own wording, with flags), and the
	// optimizer's settings as a whole (its Validate's error names each).
	whole := map[string]bool{"Checkpoint": true, "Opt": true}
	found, bads := 0, 0
	err := filepath.WalkDir("../../trainer", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok && len(call.Args) > 0 {
				lit, ok2 := call.Args[0].(*ast.BasicLit)
				// The ConfigErrors of trainer, trainer/engine and
				// trainer/config: config.Bad (Bad inside config) and
				// engine's bad; the other subpackages' are local closures.
				if ok2 && lit.Kind == token.STRING && configBad(call.Fun, filepath.Dir(path)) {
					bads++
					field, _ := strconv.Unquote(lit.Value)
					if _, ok := flagNames()[field]; !ok && !whole[field] {
						t.Errorf("%s: bad(%s, …) names a setting no flag sets (or whose flag's Value holds no pointer to it)", path, lit.Value)
					}
				}
			}
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				for _, s := range settingRE.FindAllString(lit.Value, -1) {
					found++
					if _, ok := settingFlag(s); !ok {
						t.Errorf("%s: %s names %s, which no flag sets (register a flag whose Value points at it, or add it to checkpointFlagNames)", path, lit.Value, s)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 10 || bads < 40 {
		t.Errorf("found %d settings named in package trainer's messages and %d bad(…) calls; the scan is broken", found, bads)
	}
	base := fmt.Errorf("loss is NaN: lower Config.Opt.LR or check the data: %w", trainer.ErrNonFinite)
	got := wordFlags(fmt.Errorf("epoch 1: %w", base))
	if got.Error() != "epoch 1: loss is NaN: lower --lr or check the data: "+trainer.ErrNonFinite.Error() || !errors.Is(got, trainer.ErrNonFinite) {
		t.Errorf("worded: %q (is ErrNonFinite: %v)", got, errors.Is(got, trainer.ErrNonFinite))
	}
	var b strings.Builder
	fmt.Fprintf(flagWords{&b}, "resume: refusing x: it was written by a job with Config.Sync ps, this one has allreduce\n")
	if want := "resume: refusing x: it was written by a job with --sync ps, this one has allreduce\n"; b.String() != want {
		t.Errorf("flagWords wrote %q, want %q", b.String(), want)
	}
}
