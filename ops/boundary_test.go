package ops_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// storeWrites are the Store methods that change an operation or its client requests. Only
// the ledger (package ops) may call them; the Postgres store implements them.
var storeWrites = map[string]bool{
	"Open": true, "Join": true, "Claim": true, "BeginAttempt": true, "Transition": true, "SetPhase": true,
	"ClaimStalled": true, "ExpireDue": true, "AnswerClientRequest": true, "RecordRequest": true,
}

var sqlWrite = regexp.MustCompile(`(?i)\b(insert\s+into|update|delete\s+from)\s+(operations|attempts|client_requests)\b`)

type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	Standard   bool
	Imports    []string
}

// seeding is the package that builds operations in given states for tests and the demo,
// through the Store's writes with the Ledger's checks; pgtest gives tests their databases
// and writes years of history straight in SQL for the retention's tests; pgworld is the
// stores' tests' shared world built on both. They are the exceptions to the rule below, and
// only tests, and the production packages listed for each, may import them.
const (
	seeding = "github.com/settle-dev/settle/ops/opstest"
	pgtest  = "github.com/settle-dev/settle/ops/pg/pgtest"
	pgworld = "github.com/settle-dev/settle/ops/pg/pgtest/pgworld"
)

// seedingImporters are the production packages allowed to import each seeding package:
// the demo builds its story's states, and the test worlds (themselves used only by tests)
// their databases and operations.
var seedingImporters = map[string]map[string]bool{
	seeding: {"github.com/settle-dev/settle/internal/demo": true, pgworld: true},
	pgtest: {"github.com/settle-dev/settle/internal/testworld": true, pgworld: true,
		"github.com/settle-dev/settle/ops/refund/refundtest": true},
	pgworld: {},
}

// bodyWriters are the stores that may change an operation row without the Ledger because
// what they change is no part of its state: the body purge deletes the request and the
// answer of finished LLM calls past their keep, and touches no status, version, lease or
// attempt (the purge's own tests hold it to that).
var bodyWriters = map[string]bool{"github.com/settle-dev/settle/ops/pg/purgestore": true}

// TestOnlyTheLedgerWritesOperations fails when production code outside ops and ops/pg
// writes an operation row: by SQL text, or by calling a writing method of the Store
// contract (or of the Postgres store) instead of going through the Ledger, whose checks
// every path must pass.
func TestOnlyTheLedgerWritesOperations(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the whole module; run without -short")
	}
	pkgs := listPackages(t)
	exports := map[string]string{}
	for _, p := range pkgs {
		exports[p.ImportPath] = p.Export
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, os.ErrNotExist
		}
		return os.Open(f)
	})
	checked := 0
	for _, p := range pkgs {
		if p.Standard || !strings.HasPrefix(p.ImportPath, "github.com/settle-dev/settle") {
			continue
		}
		if p.ImportPath == "github.com/settle-dev/settle/ops" || p.ImportPath == "github.com/settle-dev/settle/ops/pg" || seedingImporters[p.ImportPath] != nil || bodyWriters[p.ImportPath] {
			continue
		}
		for pkg, allowed := range seedingImporters {
			if slices.Contains(p.Imports, pkg) && !allowed[p.ImportPath] {
				t.Errorf("%s imports %s, which only tests may use: a flow goes through the Ledger", p.ImportPath, pkg)
			}
		}
		checked++
		for _, bad := range storeWriteCalls(t, p, imp) {
			t.Errorf("%s writes operations around the Ledger: %s", p.ImportPath, bad)
		}
	}
	if checked < 10 {
		t.Fatalf("only %d packages checked: the package list is wrong", checked)
	}
}

func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-export", "-json", "github.com/settle-dev/settle/...")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, errb.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// storeWriteCalls type-checks p's production files and lists its SQL writes to operation
// tables and its calls of writing methods on ops.Store or *pg.DB.
func storeWriteCalls(t *testing.T, p listedPackage, imp types.Importer) []string {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	var bad []string
	for _, name := range p.GoFiles {
		path := filepath.Join(p.Dir, name)
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		files = append(files, f)
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && sqlWrite.MatchString(lit.Value) {
				bad = append(bad, fset.Position(lit.Pos()).String()+": SQL "+sqlWrite.FindString(lit.Value))
			}
			return true
		})
	}
	info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: imp, Error: func(error) {}}
	if _, err := conf.Check(p.ImportPath, fset, files, info); err != nil {
		t.Fatalf("type-check %s: %v", p.ImportPath, err)
	}
	store := storeContract(t, imp)
	for sel, s := range info.Selections {
		want, ok := store[sel.Sel.Name]
		if s.Kind() != types.MethodVal || !ok || !storeWrites[sel.Sel.Name] {
			continue
		}
		if got, ok := s.Obj().Type().(*types.Signature); ok && sameParams(got, want) {
			bad = append(bad, fset.Position(sel.Pos()).String()+": "+types.TypeString(s.Recv(), nil)+"."+sel.Sel.Name)
		}
	}
	return bad
}

// storeContract returns the signatures of ops.Store's methods. A method of any type with
// the same name and parameters is that contract's method (the Postgres store, or an
// interface a flow declares to reach it).
func storeContract(t *testing.T, imp types.Importer) map[string]*types.Signature {
	t.Helper()
	pkg, err := imp.Import("github.com/settle-dev/settle/ops")
	if err != nil {
		t.Fatalf("import ops: %v", err)
	}
	iface := pkg.Scope().Lookup("Store").Type().Underlying().(*types.Interface)
	out := map[string]*types.Signature{}
	for i := range iface.NumMethods() {
		m := iface.Method(i)
		out[m.Name()] = m.Type().(*types.Signature)
	}
	return out
}

func sameParams(a, b *types.Signature) bool {
	return types.Identical(a.Params(), b.Params()) && types.Identical(a.Results(), b.Results())
}
