package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// testedHere are the entry points whose behaviour each package's own tests must exercise,
// by package and method name. A package whose logic is tested only through the packages
// above it (web pages, the store's tests) passes its own `go test` while testing nothing,
// and a change to it is caught, if at all, far from where it was made.
var testedHere = map[string][]string{
	// The refund tool: one refund per intent however often it is called, and the lookup
	// that closes an operation with the provider's record.
	"ops/refund": {"Refund", "Lookup"},
	// The desk's closes by hand and the four-eyes approvals around them (ops rule 13).
	"ops/desk": {"CloseManually", "Proposal", "Approve", "Reject"},
	// The LLM gateway: one generation per key whatever the client sends again, its key
	// rules, its policies and the lookup before a resend, asked of the gateway itself rather
	// than through web's routes, its counters of what it sent, and the purge of bodies past
	// their keep.
	"ops/llm": {"Complete", "Stats", "RunOnce"},
}

// TestToolsAreTestedBesideTheirCode fails when a package's own tests no longer call one of
// its entry points in testedHere. The check is by name, which is enough to keep a test from
// wandering off to another package unnoticed.
func TestToolsAreTestedBesideTheirCode(t *testing.T) {
	root := moduleRoot(t)
	for _, pkg := range keys(testedHere) {
		called := testCalls(t, filepath.Join(root, filepath.FromSlash(pkg)))
		for _, name := range testedHere[pkg] {
			if !called[name] {
				t.Errorf("no test of %s calls %s: its tests belong beside its code, not in the packages that use it", pkg, name)
			}
		}
	}
}

// testCalls is the set of method and function names called in the test files of dir.
func testCalls(t *testing.T, dir string) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), "_test.go") {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(files)
	called := map[string]bool{}
	fset := token.NewFileSet()
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				switch fn := c.Fun.(type) {
				case *ast.SelectorExpr:
					called[fn.Sel.Name] = true
				case *ast.Ident:
					called[fn.Name] = true
				}
			}
			return true
		})
	}
	return called
}
