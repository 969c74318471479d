package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestCommandPlaysNoDemo keeps cmd/settle to settings, wiring and commands: the demo's
// fakes, history and traffic live in internal/demo, which the demo command hands a running
// server to. In cmd/settle only the 'settle fake ...' commands, which serve one fake for a
// person to try, may use the fakes of ops/fake directly; any other production file that does
// is demo code in the wrong place.
func TestCommandPlaysNoDemo(t *testing.T) {
	bad := fakeUsersBesideTheFakeCommands(t, filepath.Join(moduleRoot(t), "cmd", "settle"))
	for _, f := range bad {
		t.Errorf("cmd/settle/%s imports ops/fake but serves no 'settle fake' command: the demo's code belongs in internal/demo", f)
	}
}

// fakeUsersBesideTheFakeCommands lists the production files of dir that import ops/fake
// without declaring a fake command (a function named fake...).
func fakeUsersBesideTheFakeCommands(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		usesFake := false
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == module+"/ops/fake" {
				usesFake = true
			}
		}
		if !usesFake {
			continue
		}
		command := false
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "fake") {
				command = true
			}
		}
		if !command {
			bad = append(bad, name)
		}
	}
	sort.Strings(bad)
	return bad
}
