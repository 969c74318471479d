package ops_test

import (
	"bufio"
	"bytes"
	"go/parser"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The guarantees live in the package documentation of ops (doc.go). These tests keep the
// repository citing it, and nothing outside the repository.

var (
	// Citations of documents that are not in the repository. The patterns are written so
	// that this file does not match them itself.
	outsideDocRe = regexp.MustCompile(`(?i)\bdesign\.md\b`)
	seedRe       = regexp.MustCompile(`(?i)\bseeds?\s+0{2}`)
	// A rule citation: "rule 6", "Rule 10:", "ops rule 8", "rules 4 and 5",
	// "rule 6 in package ops".
	ruleRe = regexp.MustCompile(`(?i)\b(ops\s+)?rules?\s+(\d+(?:\s*(?:,|and|or)\s*\d+)*)(\s+(?:in|of)\s+package\s+ops\b)?`)
	numRe  = regexp.MustCompile(`\d+`)
)

// moduleRoot is the nearest folder above the test's working directory with a go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
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
			t.Fatal("no go.mod above the test's working directory")
		}
		dir = parent
	}
}

// documentedRules reads the numbered list under "# The rules" in doc.go and returns how
// many rules it holds, checking they are numbered 1, 2, 3... without gaps.
func documentedRules(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	item := regexp.MustCompile(`^//\s+(\d+)\.\s`)
	in, n := false, 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "// # ") {
			in = strings.TrimPrefix(line, "// # ") == "The rules"
			continue
		}
		if !in {
			continue
		}
		if m := item.FindStringSubmatch(line); m != nil {
			got, _ := strconv.Atoi(m[1])
			if got != n+1 {
				t.Fatalf("doc.go: rule %d follows rule %d; the rules are numbered 1, 2, 3...", got, n)
			}
			n = got
		}
	}
	if n == 0 {
		t.Fatal(`doc.go has no numbered list under "# The rules"`)
	}
	return n
}

// walkSources calls fn for every source and documentation file of the repository.
func walkSources(t *testing.T, root string, fn func(rel string, src []byte)) {
	t.Helper()
	exts := map[string]bool{".go": true, ".sql": true, ".templ": true, ".md": true, ".yaml": true, ".yml": true}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch {
			case d.Name() == ".git", d.Name() == "node_modules", d.Name() == ".settle", rel == "static/vendor":
				return filepath.SkipDir
			}
			return nil
		}
		if !exts[filepath.Ext(path)] {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fn(rel, src)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func lineOf(src []byte, off int) int { return bytes.Count(src[:off], []byte("\n")) + 1 }

func TestNoCitationOfFilesOutsideTheRepository(t *testing.T) {
	t.Parallel()
	walkSources(t, moduleRoot(t), func(rel string, src []byte) {
		for _, re := range []*regexp.Regexp{outsideDocRe, seedRe} {
			for _, loc := range re.FindAllIndex(src, -1) {
				t.Errorf("%s:%d: %q cites a file that is not in the repository; cite the package documentation of ops or describe the scenario",
					rel, lineOf(src, loc[0]), src[loc[0]:loc[1]])
			}
		}
	})
}

// comment is one comment of a source file with the line it starts on.
type comment struct {
	line int
	text string
}

// goComments returns the comments of a Go file. A file that does not scan cleanly (someone
// is editing it) still gives the comments before the trouble.
func goComments(src []byte) []comment {
	fset := token.NewFileSet()
	f := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(f, src, func(token.Position, string) {}, scanner.ScanComments)
	var out []comment
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return out
		}
		if tok == token.COMMENT {
			out = append(out, comment{fset.Position(pos).Line, lit})
		}
	}
}

// sqlComments returns the "--" comments of a SQL file.
func sqlComments(src []byte) []comment {
	var out []comment
	for i, line := range strings.Split(string(src), "\n") {
		if _, c, ok := strings.Cut(line, "--"); ok {
			out = append(out, comment{i + 1, c})
		}
	}
	return out
}

func TestRuleCitationsNameADocumentedRule(t *testing.T) {
	t.Parallel()
	n := documentedRules(t)
	walkSources(t, moduleRoot(t), func(rel string, src []byte) {
		var comments []comment
		switch filepath.Ext(rel) {
		case ".go":
			comments = goComments(src)
		case ".sql":
			comments = sqlComments(src)
		default:
			return
		}
		inOps := filepath.Dir(rel) == "ops"
		for _, c := range comments {
			for _, m := range ruleRe.FindAllStringSubmatch(c.text, -1) {
				for _, num := range numRe.FindAllString(m[2], -1) {
					if k, _ := strconv.Atoi(num); k < 1 || k > n {
						t.Errorf("%s:%d: %q cites rule %d; the package documentation of ops lists rules 1 to %d", rel, c.line, m[0], k, n)
					}
				}
				if !inOps && m[1] == "" && m[3] == "" {
					t.Errorf(`%s:%d: %q is outside package ops: write "ops rule N" or "rule N in package ops"`, rel, c.line, m[0])
				}
			}
		}
	})
}

// TestOnePackageComment keeps the package documentation in doc.go only.
func TestOnePackageComment(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if has := f.Doc != nil; has != (name == "doc.go") {
			t.Errorf("%s: package comment %v; package ops keeps its documentation in doc.go only", name, has)
		}
	}
}

// TestEveryRuleIsCitedByATest keeps each numbered rule traced to at least one test that
// would fail if it broke: a rule no test cites is a guarantee nobody checks.
func TestEveryRuleIsCitedByATest(t *testing.T) {
	t.Parallel()
	n := documentedRules(t)
	cited := map[int][]string{}
	walkSources(t, moduleRoot(t), func(rel string, src []byte) {
		if !strings.HasSuffix(rel, "_test.go") || rel == "ops/doc_test.go" {
			return
		}
		for _, c := range goComments(src) {
			for _, m := range ruleRe.FindAllStringSubmatch(c.text, -1) {
				for _, num := range numRe.FindAllString(m[2], -1) {
					k, _ := strconv.Atoi(num)
					cited[k] = append(cited[k], rel)
				}
			}
		}
	})
	for k := 1; k <= n; k++ {
		if len(cited[k]) == 0 {
			t.Errorf("rule %d of the package documentation is cited by no test: cite it (\"ops rule %d\") in the test that holds it", k, k)
		}
	}
}
