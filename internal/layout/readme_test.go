package layout

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// readmeImports maps the package names the README's Go examples use to
// their import paths.
var readmeImports = map[string]string{
	"async":     module + "/sinks/async",
	"bucketing": module + "/bucketing",
	"bulk":      module + "/filesink/bulk",
	"committer": module + "/committer",
	"driver":    module + "/committer/driver",
	"filesink":  module + "/filesink",
	"httpsink":  module + "/sinks/httpsink",
	"kafka":     module + "/source/kafka",
	"localfs":   module + "/committer/localfs",
	"mysqlxa":   module + "/committer/mysqlxa",
	"pipeline":  module + "/pipeline",
	"recovery":  module + "/recovery",
	"s3":        module + "/committer/s3",
	"source":    module + "/source",
	"vfs":       module + "/vfs",
	"context":   "context",
	"json":      "encoding/json",
	"slog":      "log/slog",
	"time":      "time",
	"fmt":       "fmt",
}

// readmePrelude stands for the user's own code the examples call: their
// context, their target's client, what they do with a manifest's files.
const readmePrelude = `
var ctx = context.Background()

// must stops the example at an error.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// index is the user's own target for the asynchronous sink.
var index userIndex

type userIndex struct{}

func (userIndex) Bulk(ctx context.Context, key any, records any) error { return nil }

// process is what the user does with a published file.
func process(args ...any) {}

// url is the user's HTTP endpoint.
var url = "https://ingest.example.com/v1/events"
`

// TestReadmeExamplesBuild compiles every Go example of README.md as a
// program of a module outside this one, so that the examples use only the
// public API (no internal package) and match its signatures.
func TestReadmeExamplesBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module (go mod tidy, go build)")
	}
	root := moduleRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(readme))
	if len(blocks) == 0 {
		t.Fatal("README.md has no Go examples")
	}
	dir := t.TempDir()
	src, err := readmeProgram(blocks)
	if err != nil {
		t.Fatal(err)
	}
	gomod := fmt.Sprintf("module example.com/readme\n\ngo 1.26\n\nrequire %s v0.0.0\n\nreplace %s => %s\n", module, module, root)
	for name, data := range map[string]string{"main.go": src, "go.mod": gomod} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", os.DevNull, "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in a module outside this one: %v\n%s\n--- the program made of README.md's examples ---\n%s",
				strings.Join(args, " "), err, out, numbered(src))
		}
	}
}

var goBlockRE = regexp.MustCompile("(?ms)^```go\n(.*?)^```")

func goBlocks(md string) []string {
	var blocks []string
	for _, m := range goBlockRE.FindAllStringSubmatch(md, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// readmeProgram makes one package main of the examples: each is the body of
// a function of its own returning an error, its variables used, with the
// imports it names.
func readmeProgram(blocks []string) (string, error) {
	used := map[string]bool{"context": true}
	var funcs bytes.Buffer
	for i, b := range blocks {
		vars, pkgs, err := parseBlock(b)
		if err != nil {
			return "", fmt.Errorf("README.md Go example %d does not parse: %v\n%s", i+1, err, b)
		}
		for _, name := range pkgs {
			used[name] = true
		}
		fmt.Fprintf(&funcs, "\nfunc example%d() error {\n%s", i+1, b)
		for _, v := range vars {
			fmt.Fprintf(&funcs, "\t_ = %s\n", v)
		}
		funcs.WriteString("\treturn nil\n}\n")
	}
	var src bytes.Buffer
	src.WriteString("// Command readme is README.md's Go examples, compiled by a test.\npackage main\n\nimport (\n")
	names := make([]string, 0, len(used))
	for name := range used {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(&src, "\t%q\n", readmeImports[name])
	}
	src.WriteString(")\n\nfunc main() {}\n")
	src.WriteString(readmePrelude)
	src.Write(funcs.Bytes())
	return src.String(), nil
}

// parseBlock lists the variables a block's top-level statements declare
// and the packages of readmeImports it uses.
func parseBlock(block string) (vars, pkgs []string, err error) {
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc f() {\n"+block+"\n}", 0)
	if err != nil {
		return nil, nil, err
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && readmeImports[id.Name] != "" {
				pkgs = append(pkgs, id.Name)
			}
		}
		return true
	})
	seen := map[string]bool{}
	add := func(id *ast.Ident) {
		if id.Name != "_" && !seen[id.Name] {
			seen[id.Name] = true
			vars = append(vars, id.Name)
		}
	}
	for _, st := range f.Decls[0].(*ast.FuncDecl).Body.List {
		switch st := st.(type) {
		case *ast.AssignStmt:
			if st.Tok == token.DEFINE {
				for _, e := range st.Lhs {
					if id, ok := e.(*ast.Ident); ok {
						add(id)
					}
				}
			}
		case *ast.DeclStmt:
			if g, ok := st.Decl.(*ast.GenDecl); ok {
				for _, s := range g.Specs {
					if vs, ok := s.(*ast.ValueSpec); ok {
						for _, id := range vs.Names {
							add(id)
						}
					}
				}
			}
		}
	}
	return vars, pkgs, nil
}

func numbered(src string) string {
	var b strings.Builder
	for i, line := range strings.Split(src, "\n") {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, line)
	}
	return b.String()
}
