package storetest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// Run lists every test of the suite: one it left out would pass for
// every store, whatever the store did.
func TestRunListsEveryTest(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	var tests []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			switch {
			case !ok || fd.Recv != nil:
			case fd.Name.Name == "Run":
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					if id, ok := n.(*ast.Ident); ok {
						listed[id.Name] = true
					}
					return true
				})
			case strings.HasPrefix(fd.Name.Name, "test"):
				tests = append(tests, fd.Name.Name)
			}
		}
	}
	if len(tests) < 40 {
		t.Fatalf("found %d tests in %v, want the suite's", len(tests), files)
	}
	for _, name := range tests {
		if !listed[name] {
			t.Errorf("Run does not run %s", name)
		}
	}
}
