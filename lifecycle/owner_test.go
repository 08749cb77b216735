package lifecycle_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The lifecycle knows nothing of MCP: no package of the MCP SDK is in its
// import graph.
func TestImportsNoMCPSDK(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/modelcontextprotocol/") {
			t.Errorf("lifecycle depends on %s", dep)
		}
	}
}

// The lifecycle is the only writer of task rows: no code of the bridge or
// of the store CLI calls a store's Create or Update, except the store
// wrappers (metrics, traces) that pass a call on in their own Create and
// Update.
func TestOnlyTheLifecycleWritesTaskRows(t *testing.T) {
	for _, dir := range []string{"../bridge", "../cmd/jobbridge"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil || fn.Recv != nil && (fn.Name.Name == "Create" || fn.Name.Name == "Update") {
					continue // a wrapper passing its own call on
				}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok || sel.Sel.Name != "Create" && sel.Sel.Name != "Update" {
						return true
					}
					recv := exprText(sel.X)
					if last := recv[strings.LastIndex(recv, ".")+1:]; strings.EqualFold(last, "store") {
						t.Errorf("%s: %s calls %s.%s: task rows are written through the lifecycle", fset.Position(call.Pos()), fn.Name.Name, recv, sel.Sel.Name)
					}
					return true
				})
			}
		}
	}
}

func exprText(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprText(e.X) + "." + e.Sel.Name
	}
	return ""
}
