// Package codesize holds no production code: its test keeps every hand-written Go file in the
// module small enough to read in one sitting, so that size limits are checked by `go test`
// rather than remembered in review.
package codesize

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const (
	// maxFileLines is the longest a production .go file may be.
	maxFileLines = 500
	// maxFuncLines is the longest a function or method may be, counted as a reader sees it:
	// from the line of its func keyword to the line of its closing brace, comments and blank
	// lines included (its doc comment is not counted).
	maxFuncLines = 80
)

// offence is one file or function over its limit.
type offence struct {
	key  string // the file's path, or path:function ("web/insights.go:insightCharts", "ops/pg/store.go:(*DB).Transition")
	size int    // lines of the file, or of the function
	msg  string
}

// TestSize fails naming every production file over maxFileLines lines and every function over
// maxFuncLines lines, apart from tables (see isTable). Nothing else is excused.
func TestSize(t *testing.T) {
	root := moduleRoot(t)
	var offenders []offence
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(path, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, "_templ.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		found, err := checkFile(path, filepath.ToSlash(rel))
		offenders = append(offenders, found...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	var fail []string
	for _, o := range offenders {
		fail = append(fail, o.msg)
	}
	sort.Strings(fail)
	for _, f := range fail {
		t.Error(f)
	}
}

// moduleRoot is the folder of the go.mod above the test's working directory (its package's
// folder), which is this module's root.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above " + dir)
		}
		dir = parent
	}
}

// skipDir says whether a folder holds no production code of this module: hidden folders, npm's
// node_modules, testdata, vendor, and nested modules (bench has its own go.mod and its own
// rules: it is measurement code, not product).
func skipDir(path, name string) bool {
	if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return true
	}
	switch name {
	case "node_modules", "testdata", "vendor":
		return true
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}

// checkFile returns the offences in the file at path, named by rel, its path from the module
// root.
func checkFile(path, rel string) ([]offence, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	if ast.IsGenerated(f) {
		return nil, nil
	}
	var out []offence
	if n := bytes.Count(src, []byte("\n")); n > maxFileLines {
		out = append(out, offence{rel, n, fmt.Sprintf("%s has %d lines; the limit is %d", rel, n, maxFileLines)})
	}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil || isTable(fn.Body) {
			continue
		}
		n := fset.Position(fn.Body.Rbrace).Line - fset.Position(fn.Pos()).Line + 1
		if n > maxFuncLines {
			key := rel + ":" + funcName(fn)
			out = append(out, offence{key, n, fmt.Sprintf("%s is %d lines long; the limit is %d", key, n, maxFuncLines)})
		}
	}
	return out, nil
}

// isTable reports whether a body is nothing but one table: a single statement that returns or
// assigns one composite literal. Such a function is data laid out one entry a line, and
// splitting it would scatter the table without making any logic shorter. A body with any other
// statement is logic and is measured.
func isTable(body *ast.BlockStmt) bool {
	if len(body.List) != 1 {
		return false
	}
	var exprs []ast.Expr
	switch s := body.List[0].(type) {
	case *ast.ReturnStmt:
		exprs = s.Results
	case *ast.AssignStmt:
		exprs = s.Rhs
	default:
		return false
	}
	if len(exprs) != 1 {
		return false
	}
	e := exprs[0]
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.AND {
		e = u.X
	}
	_, ok := e.(*ast.CompositeLit)
	return ok
}

// funcName is "Name" for a function and "(*T).Name" or "T.Name" for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	star := ""
	if s, ok := typ.(*ast.StarExpr); ok {
		star, typ = "*", s.X
	}
	// Generic receivers: T[K] or T[K, V].
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	name := "?"
	if id, ok := typ.(*ast.Ident); ok {
		name = id.Name
	}
	if star != "" {
		return "(" + star + name + ")." + fn.Name.Name
	}
	return name + "." + fn.Name.Name
}

// TestCheckFileMeasures keeps the measure honest on made-up code: a function of maxFuncLines+1
// lines offends and one of maxFuncLines does not, a signature's lines count, a long table is
// excused, and a long table with one more statement is not.
func TestCheckFileMeasures(t *testing.T) {
	body := func(n int) string { return strings.Repeat("\t_ = 1\n", n) }
	table := func(extra string) string {
		return "\t" + extra + "return []int{\n" + strings.Repeat("\t\t1,\n", maxFuncLines+5) + "\t}\n"
	}
	src := "package p\n\n" +
		"func long() {\n" + body(maxFuncLines-1) + "}\n\n" +
		"func fits() {\n" + body(maxFuncLines-2) + "}\n\n" +
		"// wide has a doc comment, which is not counted.\nfunc wide(\n\ta int,\n) {\n" + body(maxFuncLines-3) + "}\n\n" +
		"type T struct{}\n\nfunc (*T) tableMethod() []int {\n" + table("") + "}\n\n" +
		"func notTable() []int {\n" + table("_ = 1\n\t") + "}\n"
	path := filepath.Join(t.TempDir(), "p.go")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := checkFile(path, "p.go")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range got {
		keys = append(keys, fmt.Sprintf("%s=%d", o.key, o.size))
	}
	want := fmt.Sprintf("[p.go:long=%d p.go:wide=%d p.go:notTable=%d]", maxFuncLines+1, maxFuncLines+1, maxFuncLines+10)
	if fmt.Sprint(keys) != want {
		t.Errorf("offences %v, want %s", keys, want)
	}
}
