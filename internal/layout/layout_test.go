package layout

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/filesink/filesink"

// layers gives every package of the module its layer: a package may import
// only packages of a strictly lower layer. A new package must be added
// here, in the layer its job puts it.
var layers = map[string]int{
	// The bottom: no imports of this module, or only of the bottom's
	// packages (the record errors and origins of source, the tokenizer).
	"vfs":               0,
	"internal/jsonscan": 0,
	"source":            0,
	"bucketing":         1,
	"vfs/crashfs":       1,
	"vfs/errorfs":       1,
	"source/kafka":      1,
	"source/avro":       1,
	// The checkpoint store and records.
	"recovery": 2,
	// The two-phase protocol.
	"committer": 3,
	// The file-storage driver contract.
	"committer/driver": 4,
	// Storage: the committers and the driver conformance suite.
	"committer/localfs":    5,
	"committer/s3":         5,
	"committer/mysqlxa":    5,
	"committer/iceberg":    5,
	"committer/drivertest": 5,
	// Sinks.
	"filesink":       6,
	"sinks/async":    6,
	"filesink/bulk":  7,
	"sinks/httpsink": 7,
	// The run loop.
	"pipeline": 8,
	// The Iceberg sink (a file sink writer under a table).
	"sinks/icebergsink": 8,

	"group": 9,
	// Programs.
	"cmd/filesink/internal/metrics": 9,
	"cmd/filesink":                  10,
	"examples/wordcount":            10,
}

// harness is the prefix of the test harnesses: only tests, other
// harnesses and the harnesses' own commands may import them.
const harness = "internal/testutil/"

// layout is the package list of the module: import path (relative to the
// module) -> its non-test imports of the module.
func layout(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	pkgs := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		name := rel(fields[0])
		pkgs[name] = nil
		for _, imp := range fields[1:] {
			if r := rel(imp); r != imp {
				pkgs[name] = append(pkgs[name], r)
			}
		}
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return pkgs
}

func rel(path string) string {
	if path == module {
		return "."
	}
	return strings.TrimPrefix(path, module+"/")
}

func TestImportDirection(t *testing.T) {
	pkgs := layout(t)
	names := make([]string, 0, len(pkgs))
	for name := range pkgs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if name == "internal/layout" {
			continue
		}
		if strings.HasPrefix(name+"/", harness) {
			continue // test harnesses may import anything below them
		}
		from, ok := layers[name]
		if !ok {
			t.Errorf("package %s has no layer: add it to the layers table", name)
			continue
		}
		for _, imp := range pkgs[name] {
			if strings.HasPrefix(imp, harness) {
				t.Errorf("%s imports the test harness %s", name, imp)
				continue
			}
			to, ok := layers[imp]
			if !ok {
				continue // reported as a package of its own
			}
			if to >= from {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must run down the layers", name, from, imp, to)
			}
		}
	}
	for name := range layers {
		if _, ok := pkgs[name]; !ok {
			t.Errorf("the layers table names %s, which is not a package of the module", name)
		}
	}
}

// TestFunctionLength keeps every function outside tests and generated code
// within 100 lines, and within 80 in cmd/.
func TestFunctionLength(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		relPath, _ := filepath.Rel(root, path)
		limit := 100
		if strings.HasPrefix(filepath.ToSlash(relPath), "cmd/") {
			limit = 80
		}
		for _, problem := range longFunctions(fset, f, limit) {
			t.Errorf("%s:%s", relPath, problem)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func longFunctions(fset *token.FileSet, f *ast.File, limit int) []string {
	var problems []string
	ast.Inspect(f, func(n ast.Node) bool {
		var body *ast.BlockStmt
		name := "function literal"
		switch fn := n.(type) {
		case *ast.FuncDecl:
			body, name = fn.Body, fn.Name.Name
		case *ast.FuncLit:
			body = fn.Body
		}
		if body == nil {
			return true
		}
		start := fset.Position(n.Pos()).Line
		if lines := fset.Position(body.Rbrace).Line - start + 1; lines > limit {
			problems = append(problems, fmt.Sprintf("%d: %s has %d lines, more than %d", start, name, lines, limit))
		}
		return true
	})
	return problems
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}
