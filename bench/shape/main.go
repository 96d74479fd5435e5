// Command shape measures the shape of Go packages from their own code: in
// each package, which files use which (a file uses another when it names
// something declared there: a function, type, method, field, variable or
// constant), how many of those uses point upward, and its longest and
// most complex functions. Test files are left out.
//
//	go run ./bench/shape ./trainer/...     (make shape)
//
// Upward: the files are laid out top to bottom so that as many uses as
// possible point down (a file above the ones it uses: Eades, Lin and
// Smyth's greedy ordering for a small feedback arc set); the uses that
// still point up are the ones no layout of the files can remove without
// moving code, the cycles between files. A package whose files use each
// other one way only has none. Issue 32 asks for at most 10% inside each
// trainer package, no function over 100 lines and none of complexity 20
// or more where the loop was.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// complexAt: list the functions at least this complex.
var complexAt int

// verbose: list the upward uses, with the names each one uses.
var verbose bool

func main() {
	long := flag.Int("long", 100, "list the functions longer than this many lines")
	flag.IntVar(&complexAt, "complex", 20, "list the functions of at least this cyclomatic complexity")
	flag.BoolVar(&verbose, "v", false, "list each package's upward uses (user → used)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: go run ./bench/shape [-long N] PACKAGES (e.g. ./trainer/...)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Args(), *long, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "shape:", err)
		os.Exit(1)
	}
}

// listed is one package as go list reports it.
type listed struct{ path, dir, export string }

func list(args ...string) ([]listed, error) {
	cmd := exec.Command("go", append([]string{"list", "-e", "-export", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{.Export}}"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var ps []listed
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Split(l, "\t"); len(f) == 3 {
			ps = append(ps, listed{f[0], f[1], f[2]})
		}
	}
	return ps, nil
}

// measured is one package's shape.
type measured struct {
	path string
	shape
}

// share is the percentage of the package's uses that point upward.
func (m measured) share() float64 {
	if m.uses == 0 {
		return 0
	}
	return 100 * float64(m.upward) / float64(m.uses)
}

// measureAll measures the packages patterns name (those with files).
func measureAll(patterns []string, long int) ([]measured, error) {
	pkgs, err := list(patterns...)
	if err != nil {
		return nil, err
	}
	deps, err := list(append([]string{"-deps"}, patterns...)...)
	if err != nil {
		return nil, err
	}
	exports := map[string]string{}
	for _, d := range deps {
		exports[d.path] = d.export
	}
	var out []measured
	for _, p := range pkgs {
		s, err := measure(p, exports, long)
		if err != nil {
			return nil, err
		}
		if s.files > 0 {
			out = append(out, measured{p.path, s})
		}
	}
	return out, nil
}

func run(patterns []string, long int, w io.Writer) error {
	all, err := measureAll(patterns, long)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%-44s %5s %5s %7s %6s  %s\n", "package", "files", "uses", "upward", "share", "longest function (lines), most complex (cyclomatic)")
	var longOnes, complexOnes []string
	for _, s := range all {
		funcs := "no functions"
		if s.longest != "" {
			funcs = fmt.Sprintf("%s (%d), %s (%d)", s.longest, s.longestLines, s.complex, s.complexity)
		}
		fmt.Fprintf(w, "%-44s %5d %5d %7d %5.1f%%  %s\n", s.path, s.files, s.uses, s.upward, s.share(), funcs)
		longOnes = append(longOnes, s.long...)
		complexOnes = append(complexOnes, s.complexList...)
	}
	fmt.Fprintf(w, "\nfunctions over %d lines: %d\n", long, len(longOnes))
	for _, l := range longOnes {
		fmt.Fprintln(w, "  "+l)
	}
	fmt.Fprintf(w, "functions of complexity %d or more: %d\n", complexAt, len(complexOnes))
	for _, l := range complexOnes {
		fmt.Fprintln(w, "  "+l)
	}
	return nil
}

type shape struct {
	files, uses, upward int
	longest, complex    string
	longestLines        int
	complexity          int
	long                []string
	complexList         []string // functions of complexity ≥ complexAt
}

// measure type-checks package p (its non-test files) against its
// dependencies' export data and measures it.
func measure(p listed, exports map[string]string, long int) (shape, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(p.dir, "*.go"))
	if err != nil {
		return shape{}, err
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.ParseComments)
		if err != nil {
			return shape{}, err
		}
		if !buildsHere(f) {
			continue
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return shape{}, nil
	}
	lookup := func(path string) (io.ReadCloser, error) { return os.Open(exports[path]) }
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup), Error: func(error) {}}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	pkg, _ := conf.Check(p.path, fset, files, info) // what does not check is left out
	s := shape{files: len(files)}
	edges := map[[2]string]bool{}
	named := map[[2]string]map[string]bool{} // what each use names (-v)
	for id, obj := range info.Uses {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		if !declared(obj, pkg) {
			continue
		}
		from, to := fset.Position(id.Pos()).Filename, fset.Position(obj.Pos()).Filename
		if from != to {
			e := [2]string{filepath.Base(from), filepath.Base(to)}
			edges[e] = true
			if named[e] == nil {
				named[e] = map[string]bool{}
			}
			named[e][obj.Name()] = true
		}
	}
	var nodes []string
	for _, f := range files {
		nodes = append(nodes, filepath.Base(fset.Position(f.Pos()).Filename))
	}
	s.uses = len(edges)
	s.upward = upward(nodes, edges, named)
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) > 0 {
				name = recvName(fd.Recv.List[0].Type) + "." + name
			}
			lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if lines > s.longestLines {
				s.longest, s.longestLines = name, lines
			}
			if c := cyclomatic(fd); c > s.complexity {
				s.complex, s.complexity = name, c
			}
			if c := cyclomatic(fd); c >= complexAt {
				s.complexList = append(s.complexList, fmt.Sprintf("%s %s (%s): complexity %d", p.path, name, filepath.Base(fset.Position(fd.Pos()).Filename), c))
			}
			if lines > long {
				s.long = append(s.long, fmt.Sprintf("%s %s (%s): %d lines", p.path, name, filepath.Base(fset.Position(fd.Pos()).Filename), lines))
			}
		}
	}
	return s, nil
}

// declared reports whether obj is something a file of pkg declares for
// the others: a function or method, a field, or a package-level
// variable, constant or type (not a local one, a label or an import).
func declared(obj types.Object, pkg *types.Package) bool {
	switch o := obj.(type) {
	case *types.Func:
		return true
	case *types.Var:
		return o.IsField() || o.Parent() == pkg.Scope()
	case *types.TypeName, *types.Const:
		return o.Parent() == pkg.Scope()
	}
	return false
}

// buildsHere reports whether a file's //go:build line holds without
// tags (the default build: no cuda, cgo on).
func buildsHere(f *ast.File) bool {
	for _, g := range f.Comments {
		if g.Pos() > f.Package {
			break
		}
		for _, c := range g.List {
			if expr, ok := strings.CutPrefix(c.Text, "//go:build "); ok {
				return !strings.Contains(expr, "cuda") && !strings.Contains(expr, "!cgo")
			}
		}
	}
	return true
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

// cyclomatic is 1 + the branches of fd: if, for, range, case, comm
// clause, && and || (as gocyclo counts).
func cyclomatic(fd *ast.FuncDecl) int {
	c := 1
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil {
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		case *ast.FuncLit:
			return true
		}
		return true
	})
	return c
}

// upward lays nodes out by Eades, Lin and Smyth's greedy heuristic (take
// sinks to the bottom and sources to the top, else the node whose uses
// most outnumber its users to the top) and counts the uses (edges from
// user to used) that point up in that layout. Ties are broken by name,
// so the count does not change from run to run.
func upward(nodes []string, edges map[[2]string]bool, names map[[2]string]map[string]bool) int {
	sort.Strings(nodes)
	out, in := map[string]map[string]bool{}, map[string]map[string]bool{}
	for _, n := range nodes {
		out[n], in[n] = map[string]bool{}, map[string]bool{}
	}
	for e := range edges {
		if out[e[0]] != nil && in[e[1]] != nil {
			out[e[0]][e[1]], in[e[1]][e[0]] = true, true
		}
	}
	left := map[string]bool{}
	for _, n := range nodes {
		left[n] = true
	}
	remove := func(n string) {
		delete(left, n)
		for m := range out[n] {
			delete(in[m], n)
		}
		for m := range in[n] {
			delete(out[m], n)
		}
	}
	var top, bottom []string
	for len(left) > 0 {
		changed := true
		for changed {
			changed = false
			for _, n := range nodes {
				if left[n] && len(out[n]) == 0 { // uses nothing left: to the bottom
					bottom = append([]string{n}, bottom...)
					remove(n)
					changed = true
				}
			}
			for _, n := range nodes {
				if left[n] && len(in[n]) == 0 { // used by nothing left: to the top
					top = append(top, n)
					remove(n)
					changed = true
				}
			}
		}
		best, bestD := "", 0
		for _, n := range nodes {
			if d := len(out[n]) - len(in[n]); left[n] && (best == "" || d > bestD) {
				best, bestD = n, d
			}
		}
		if best != "" {
			top = append(top, best)
			remove(best)
		}
	}
	at := map[string]int{}
	for i, n := range append(top, bottom...) {
		at[n] = i
	}
	var up []string
	for e := range edges {
		if at[e[0]] > at[e[1]] {
			var n []string
			for k := range names[e] {
				n = append(n, k)
			}
			sort.Strings(n)
			up = append(up, e[0]+" → "+e[1]+" ("+strings.Join(n, ", ")+")")
		}
	}
	if verbose {
		sort.Strings(up)
		for _, u := range up {
			fmt.Println("    up:", u)
		}
	}
	return len(up)
}
