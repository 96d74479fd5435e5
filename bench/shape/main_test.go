package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestUpward: a layout with every use pointing down has no upward use; a
// cycle of n files has one (the fewest any layout leaves), and a use
// against a chain only it.
func TestUpward(t *testing.T) {
	e := func(pairs ...string) map[[2]string]bool {
		m := map[[2]string]bool{}
		for i := 0; i < len(pairs); i += 2 {
			m[[2]string{pairs[i], pairs[i+1]}] = true
		}
		return m
	}
	for _, c := range []struct {
		name  string
		nodes []string
		edges map[[2]string]bool
		want  int
	}{
		{"a chain", []string{"a", "b", "c"}, e("a", "b", "b", "c", "a", "c"), 0},
		{"a pair both ways", []string{"a", "b"}, e("a", "b", "b", "a"), 1},
		{"a cycle of three", []string{"a", "b", "c"}, e("a", "b", "b", "c", "c", "a"), 1},
		{"a hub used by all and using one", []string{"hub", "x", "y", "z", "low"}, e("x", "hub", "y", "hub", "z", "hub", "hub", "low", "low", "x"), 1},
		{"no uses", []string{"a", "b"}, e(), 0},
	} {
		if got := upward(c.nodes, c.edges, nil); got != c.want {
			t.Errorf("%s: %d upward, want %d", c.name, got, c.want)
		}
	}
}

// TestCyclomatic counts branches as gocyclo does.
func TestCyclomatic(t *testing.T) {
	src := `package p
func f(a, b bool, xs []int) int {
	if a && b || !a { return 1 }
	for range xs {}
	switch { case a: ; case b: ; default: }
	return 0
}`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := cyclomatic(f.Decls[0].(*ast.FuncDecl)); got != 7 {
		t.Errorf("cyclomatic %d, want 7 (1 + if + && + || + range + 2 cases)", got)
	}
}

// TestProjectShape holds the project to issue 32's shape, so that a change
// that breaks it fails here rather than in a later reading: inside each
// package of trainer, cmd and internal at most a tenth of the uses between
// files point upward, and no function in any package is over 100 lines
// (CONVENTIONS). `make shape -v` says which uses point up and what they
// name.
func TestProjectShape(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the project's packages")
	}
	all, err := measureAll([]string{"../../..."}, 100)
	if err != nil {
		t.Fatal(err)
	}
	layered := 0
	for _, m := range all {
		for _, l := range m.long {
			t.Errorf("a function over 100 lines: %s", l)
		}
		if !hub(m.path) {
			continue
		}
		layered++
		if m.share() > 10 {
			t.Errorf("%s: %d of %d uses between its files point upward (%.1f%%, at most 10%%): make shape -v names them", m.path, m.upward, m.uses, m.share())
		}
	}
	if layered < 10 || len(all) < 30 {
		t.Fatalf("measured %d packages, %d of them in trainer, cmd and internal: the pattern found too few", len(all), layered)
	}
}

// hub says a package is one of those whose files issue 32 layered
// (trainer, cmd, internal and theirs).
func hub(path string) bool {
	for _, top := range []string{"trainer", "cmd", "internal"} {
		p := "github.com/dml-project/dml/" + top
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}
