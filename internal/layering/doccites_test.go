package layering

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The manual names the tests that hold each promise, with the file each lives in, so a
// reader can open the test beside the sentence. Tests move (beside the code they test) and
// are renamed; a citation left behind sends the reader to a file without the test, and the
// promise reads as held by nothing.
var (
	testDecl = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark)\w+)\(`)
	// A cited test is a backquoted name; the files that hold it follow in parentheses as
	// backquoted paths, one or more, after one test or a list of them.
	docToken = regexp.MustCompile("`((?:Test|Benchmark)\\w+)`|\\(((?:`[\\w/.\\-]+_test\\.go`(?:,\\s*)?)+)\\)")
	docPath  = regexp.MustCompile("`([\\w/.\\-]+_test\\.go)`")
)

// TestDocsCiteTestsWhereTheyLive reads README.md and the manual in docs/ (the dated journal
// of benchmarks excepted: it records what was true on its day) and fails for every test it
// cites that does not exist, or not in the file the citation names.
func TestDocsCiteTestsWhereTheyLive(t *testing.T) {
	root := moduleRoot(t)
	defined := map[string]map[string]bool{} // test name → files (from the root) declaring it
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, m := range testDecl.FindAllSubmatch(src, -1) {
			name := string(m[1])
			if defined[name] == nil {
				defined[name] = map[string]bool{}
			}
			defined[name][filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append(docs, filepath.Join(root, "README.md"))
	cited := 0
	for _, doc := range docs {
		src, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		var pending []string
		for _, m := range docToken.FindAllStringSubmatch(string(src), -1) {
			if m[1] != "" {
				pending = append(pending, m[1])
				continue
			}
			paths := docPath.FindAllStringSubmatch(m[2], -1)
			for _, name := range pending {
				cited++
				in := false
				for _, p := range paths {
					in = in || defined[name][p[1]]
				}
				if !in {
					t.Errorf("%s cites %s in %s, but it is declared in %v", rel, name, m[2], keys(defined[name]))
				}
			}
			pending = nil
		}
		for _, name := range pending {
			cited++
			if defined[name] == nil {
				t.Errorf("%s cites %s, which no test file declares", rel, name)
			}
		}
	}
	if cited < 100 {
		t.Fatalf("found only %d cited tests in the manual: is the citation format still `TestX` (`path_test.go`)?", cited)
	}
}
