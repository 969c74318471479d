package ops_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
)

func TestNewOwnerNamesRoleAndPlace(t *testing.T) {
	if got := ops.NewOwner("reaper", "host-7"); got != "reaper:host-7" {
		t.Fatalf("NewOwner(reaper, host-7) = %q", got)
	}
	// A holder for one request or one run draws a token, so two never share a lease.
	shape := regexp.MustCompile(`^refund#[0-9a-f]{12}$`)
	a, b := ops.NewOwner("refund", ""), ops.NewOwner("refund", "")
	if !shape.MatchString(a) || !shape.MatchString(b) || a == b {
		t.Fatalf("NewOwner(refund, \"\") = %q and %q", a, b)
	}
	if run := ops.NewOwner("reconciler:host-7", ""); !strings.HasPrefix(run, "reconciler:host-7#") {
		t.Fatalf("a run of reconciler:host-7 is %q", run)
	}
}

// TestOwnersComeFromNewOwner fails when production code spells a lease owner by hand (a
// string literal or fmt.Sprintf given to something named owner) instead of calling
// ops.NewOwner, so every owner has one shape and a holder for one request never shares one.
func TestOwnersComeFromNewOwner(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.KeyValueExpr:
				if namesOwner(n.Key) && spelled(n.Value) {
					t.Errorf("%s: an owner spelled by hand; use ops.NewOwner", fset.Position(n.Pos()))
				}
			case *ast.AssignStmt:
				for i, lhs := range n.Lhs {
					if i < len(n.Rhs) && namesOwner(lhs) && spelled(n.Rhs[i]) {
						t.Errorf("%s: an owner spelled by hand; use ops.NewOwner", fset.Position(n.Pos()))
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
	if files < 100 {
		t.Fatalf("only %d files read: the walk is wrong", files)
	}
}

// namesOwner reports whether an assignment's target or a composite literal's key is named
// like a lease owner.
func namesOwner(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return strings.EqualFold(e.Name, "owner")
	case *ast.SelectorExpr:
		return strings.EqualFold(e.Sel.Name, "owner")
	}
	return false
}

// spelled reports whether an expression builds a name from a non-empty string literal or
// with fmt.Sprintf.
func spelled(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			found = found || n.Kind == token.STRING && n.Value != `""` && n.Value != "``"
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "fmt" && sel.Sel.Name == "Sprintf" {
					found = true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "ops" && sel.Sel.Name == "NewOwner" {
					return false
				}
			}
		}
		return !found
	})
	return found
}
