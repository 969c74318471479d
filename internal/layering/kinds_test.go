package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// kindConstants are package ops's operation kinds, by constant name and by value.
var kindConstants = map[string]string{"KindRefund": "refund", "KindLLMCall": "llm_call", "KindLLMJob": "llm_job"}

// TestNoKindChecksOutsideOps fails when production code outside package ops branches on an
// operation's kind: compares one with ==, != or a switch case against a kind of package ops,
// by its constant (ops.KindRefund) or its value ("refund"). What differs between kinds is
// each kind's ops.KindSpec, which its own package describes and the program registers with
// the ledger; code around the ledger asks the registry (Ledger.Kind), so that a new kind is
// one registration and not a hunt through every page. Naming a kind (opening an operation
// of it, registering it) is not branching on it and is allowed.
func TestNoKindChecksOutsideOps(t *testing.T) {
	root := moduleRoot(t)
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch {
			case rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata" || d.Name() == "vendor"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || filepath.Dir(rel) == "ops" {
			return nil
		}
		found = append(found, kindChecks(t, path, rel)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(found)
	for _, f := range found {
		t.Errorf("%s: ask the kind's registered spec (ops.Ledger.Kind) instead of comparing kinds", f)
	}
	if len(found) > 0 {
		t.Logf("%d kind checks outside package ops", len(found))
	}
}

// TestKindCheckScanSeesEveryForm: the scan finds each way of branching on a kind, and lets
// pass a mention that is no comparison and a string that is no operation's kind (the load
// driver's traffic mix names its intents "refund" too).
func TestKindCheckScanSeesEveryForm(t *testing.T) {
	src := `package p
import "github.com/settle-dev/settle/ops"
func f(op *ops.Operation, k ops.Kind) {
	if op.Kind == ops.KindRefund {}
	if ops.KindLLMJob != k {}
	if op.Kind == "llm_call" {}
	switch op.Kind { case ops.KindLLMCall, "x": }
	switch kind := "refund"; kind { case "refund": }
	switch { case op.Kind == ops.KindLLMJob: }
	_ = ops.Intent{Kind: ops.KindRefund}
	_ = map[ops.Kind]int{ops.KindRefund: 1}
	if op.Status == "refund" {}
}`
	dir := t.TempDir()
	path := filepath.Join(dir, "p.go")
	if err := writeFile(path, src); err != nil {
		t.Fatal(err)
	}
	got := kindChecks(t, path, "p.go")
	var lines []string
	for _, g := range got {
		lines = append(lines, strings.SplitN(g, " ", 2)[0])
	}
	want := []string{"p.go:4", "p.go:5", "p.go:6", "p.go:7", "p.go:9"}
	if strings.Join(lines, ",") != strings.Join(want, ",") {
		t.Fatalf("found %v, want %v", got, want)
	}
}

// kindChecks lists the comparisons of an operation kind in the file at path.
func kindChecks(t *testing.T, path, rel string) []string {
	t.Helper()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", rel, err)
	}
	var out []string
	report := func(n ast.Node, what string) {
		out = append(out, rel+":"+strconv.Itoa(fset.Position(n.Pos()).Line)+" "+what)
	}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if n.Op != token.EQL && n.Op != token.NEQ {
				return true
			}
			if k := kindConstant(n.X); k != "" {
				report(n, "compares "+k)
			} else if k := kindConstant(n.Y); k != "" {
				report(n, "compares "+k)
			} else if k := kindValue(n.Y); k != "" && isKindField(n.X) {
				report(n, "compares the kind with "+k)
			} else if k := kindValue(n.X); k != "" && isKindField(n.Y) {
				report(n, "compares the kind with "+k)
			}
		case *ast.SwitchStmt:
			for _, s := range n.Body.List {
				for _, e := range s.(*ast.CaseClause).List {
					if k := kindConstant(e); k != "" {
						report(e, "switches on "+k)
					} else if k := kindValue(e); k != "" && n.Tag != nil && isKindField(n.Tag) {
						report(e, "switches on "+k)
					}
				}
			}
		}
		return true
	})
	return out
}

// kindConstant names e when it is a kind constant of package ops (ops.KindRefund).
func kindConstant(e ast.Expr) string {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "ops" {
		return ""
	}
	if _, ok := kindConstants[sel.Sel.Name]; ok {
		return "ops." + sel.Sel.Name
	}
	return ""
}

// kindValue quotes e when it is a string literal holding a kind's value ("refund").
func kindValue(e ast.Expr) string {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return ""
	}
	v, err := strconv.Unquote(lit.Value)
	if err != nil {
		return ""
	}
	for _, k := range kindConstants {
		if v == k {
			return lit.Value
		}
	}
	return ""
}

// isKindField reports whether e reads a field named Kind (op.Kind, f.Kind).
func isKindField(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Kind"
}

// moduleRoot is the module's directory: the test runs in internal/layering.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no module root above the test: %v", err)
	}
	return root
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }
