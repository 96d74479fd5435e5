package main

import (
	"go/ast"
	"go/parser"
	"go/token"
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
