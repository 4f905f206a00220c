//go:build ignore

// Shape prints the shape of the Go code under a directory: lines per
// package (code and tests), the longest functions, and every mutex with
// where it is declared. Run it from the module root:
//
//	go run scripts/shape.go [-top 15] [dir]
//
// It reads only the standard library's go/parser, so the same command run
// on two checkouts compares them.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type pkgSize struct {
	files, code, tests int
}

type fn struct {
	name  string
	lines int
}

func main() {
	top := flag.Int("top", 15, "how many of the longest functions to list")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	sizes := map[string]*pkgSize{}
	var funcs []fn
	var mutexes []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		if strings.Contains(string(src[:min(len(src), 200)]), "//go:build ignore") {
			return nil
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		s := sizes[dir]
		if s == nil {
			s = &pkgSize{}
			sizes[dir] = s
		}
		lines := strings.Count(string(src), "\n")
		test := strings.HasSuffix(path, "_test.go")
		if test {
			s.tests += lines
			return nil
		}
		s.files++
		s.code += lines
		rel, _ := filepath.Rel(root, path)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				name := n.Name.Name
				if n.Recv != nil && len(n.Recv.List) > 0 {
					name = recvName(n.Recv.List[0].Type) + "." + name
				}
				start, end := fset.Position(n.Pos()).Line, fset.Position(n.End()).Line
				funcs = append(funcs, fn{dir + ": " + name, end - start + 1})
			case *ast.Field:
				if isMutex(n.Type) {
					for _, id := range n.Names {
						mutexes = append(mutexes, fmt.Sprintf("%s:%d %s", rel, fset.Position(id.Pos()).Line, id.Name))
					}
				}
			case *ast.ValueSpec:
				if n.Type != nil && isMutex(n.Type) {
					for _, id := range n.Names {
						mutexes = append(mutexes, fmt.Sprintf("%s:%d %s", rel, fset.Position(id.Pos()).Line, id.Name))
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}

	var dirs []string
	total := 0
	for d, s := range sizes {
		dirs = append(dirs, d)
		total += s.code
	}
	sort.Strings(dirs)
	fmt.Printf("%-24s %6s %7s %6s %6s\n", "package", "files", "code", "share", "tests")
	for _, d := range dirs {
		s := sizes[d]
		share := 0.0
		if total > 0 {
			share = 100 * float64(s.code) / float64(total)
		}
		fmt.Printf("%-24s %6d %7d %5.1f%% %6d\n", d, s.files, s.code, share, s.tests)
	}
	fmt.Printf("%-24s %6s %7d\n\n", "total", "", total)

	sort.SliceStable(funcs, func(i, j int) bool { return funcs[i].lines > funcs[j].lines })
	fmt.Printf("longest functions (lines, non-test code):\n")
	for _, f := range funcs[:min(*top, len(funcs))] {
		fmt.Printf("%5d  %s\n", f.lines, f.name)
	}
	fmt.Printf("\nmutexes (sync.Mutex and sync.RWMutex, non-test code): %d\n", len(mutexes))
	for _, m := range mutexes {
		fmt.Printf("  %s\n", m)
	}
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

func isMutex(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "sync" && (sel.Sel.Name == "Mutex" || sel.Sel.Name == "RWMutex")
}
