// Package layering holds no production code: its test keeps the module's imports pointing
// one way. Package ops and its subpackages are the bottom layer; alerts, web, views and
// cmd/settle build on them, never the other way round.
package layering

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/settle-dev/settle"

// belowOps are the only module packages outside ops/ that production code under ops/ may
// import, each with the reason. They must not depend on anything under ops/ themselves.
var belowOps = map[string]string{
	"migrations":        "the SQL schema that ops/pg applies",
	"alerts":            "the alert evaluator, whose store and counters ops/pg/alertstore implements",
	"internal/httppost": "the one way notifiers post to a receiver, shared by ops/outbox, ops/notify and alerts",
}

type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// production lists the module's production packages (test files not included) by path
// relative to the module root ("" for the root, "ops/pg"), with their imports and all
// their dependencies reduced to module packages.
func production(t *testing.T) map[string]listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports,Deps", module+"/...")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, errb.String())
	}
	pkgs := map[string]listed{}
	for dec := json.NewDecoder(&out); dec.More(); {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		rel, ok := inModule(p.ImportPath)
		if !ok {
			continue
		}
		pkgs[rel] = listed{ImportPath: rel, Imports: inModuleOnly(p.Imports), Deps: inModuleOnly(p.Deps)}
	}
	if _, ok := pkgs["ops"]; !ok {
		t.Fatalf("go list did not list package ops:\n%s", errb.String())
	}
	return pkgs
}

func inModule(path string) (string, bool) {
	if path == module {
		return "", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

func inModuleOnly(paths []string) []string {
	var out []string
	for _, p := range paths {
		if rel, ok := inModule(p); ok {
			out = append(out, rel)
		}
	}
	return out
}

func underOps(rel string) bool { return rel == "ops" || strings.HasPrefix(rel, "ops/") }

// folder is the top-level folder of a package: "ops/pg" is in "ops", "cmd/settle" in "cmd".
// Each package under internal/ counts as a folder of its own: they are unrelated helpers (a
// leaf like internal/httppost, test worlds that build on everything), not one layer.
func folder(rel string) string {
	f, rest, _ := strings.Cut(rel, "/")
	if f == "internal" {
		sub, _, _ := strings.Cut(rest, "/")
		return f + "/" + sub
	}
	return f
}

// TestOpsImportsNothingAboveIt fails when production code under ops/ imports a module
// package outside ops/ that is not in belowOps: ops never depends on web, views, cmd or
// internal.
func TestOpsImportsNothingAboveIt(t *testing.T) {
	pkgs := production(t)
	for _, p := range sorted(pkgs) {
		if !underOps(p.ImportPath) {
			continue
		}
		for _, imp := range p.Imports {
			if underOps(imp) {
				continue
			}
			if _, ok := belowOps[imp]; !ok {
				t.Errorf("%s imports %s: code under ops/ may import outside ops/ only %v", p.ImportPath, imp, keys(belowOps))
			}
		}
	}
	for name, why := range belowOps {
		p, ok := pkgs[name]
		if !ok {
			t.Errorf("belowOps names %s (%s), which is not a package of the module", name, why)
			continue
		}
		for _, dep := range p.Deps {
			if underOps(dep) {
				t.Errorf("%s (%s) depends on %s: ops/ imports it, so it must not reach back into ops/", name, why, dep)
			}
		}
	}
}

// TestNoCycleBetweenFolders fails when two top-level folders depend on each other through
// production code, as ops/pg → alerts → ops once did: the arrows between folders go one way.
func TestNoCycleBetweenFolders(t *testing.T) {
	pkgs := production(t)
	// uses[a][b] is one package of folder a that depends on a package of folder b: a direct
	// import where there is one, else a dependency through other packages.
	uses := map[string]map[string]string{}
	note := func(p listed, deps []string, arrow string) {
		from := folder(p.ImportPath)
		for _, dep := range deps {
			to := folder(dep)
			if to == from {
				continue
			}
			if uses[from] == nil {
				uses[from] = map[string]string{}
			}
			if _, ok := uses[from][to]; !ok {
				uses[from][to] = p.ImportPath + arrow + dep
			}
		}
	}
	for _, p := range sorted(pkgs) {
		note(p, p.Imports, " imports ")
	}
	for _, p := range sorted(pkgs) {
		note(p, p.Deps, " depends on ")
	}
	for _, a := range keys(uses) {
		for _, b := range keys(uses[a]) {
			if back, ok := uses[b][a]; ok && a < b {
				t.Errorf("folders %s/ and %s/ depend on each other: %s, and %s", a, b, uses[a][b], back)
			}
		}
	}
}

func sorted(pkgs map[string]listed) []listed {
	out := make([]listed, 0, len(pkgs))
	for _, k := range keys(pkgs) {
		out = append(out, pkgs[k])
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// belowPg are the module packages that production code of ops/pg itself may import: the
// bottom of the house holds the pool, the migrations, the ledger's store and the outbox,
// and knows the domain's types and nothing of the use cases built on them.
var belowPg = map[string]string{
	"ops":        "the domain's types and rules that the ledger's store keeps",
	"migrations": "the SQL schema that ops/pg applies",
	"ops/outbox": "the transactional outbox, whose Store the ledger's store implements",
	"ops/reqlog": "the request identifiers the ledger's store writes on client request rows",
}

// TestPgImportsNoUseCase fails when production code of ops/pg imports a module package
// that is not below it (belowPg): a use case's statements go in a store of their own under
// ops/pg/ (as ops/pg/alertstore, deskstore, accountstore, rollupstore hold theirs), which
// imports ops/pg and the use case, so the SQL layer never sits above the code it serves.
func TestPgImportsNoUseCase(t *testing.T) {
	pkgs := production(t)
	pg, ok := pkgs["ops/pg"]
	if !ok {
		t.Fatal("go list did not list package ops/pg")
	}
	for _, imp := range pg.Imports {
		if _, below := belowPg[imp]; !below {
			t.Errorf("ops/pg imports %s: a use case's statements belong in a store of its own under ops/pg/ (as ops/pg/alertstore), not in ops/pg", imp)
		}
	}
}
