package saferetry

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestExportedTypesSayConcurrencySafety holds the style rule that every
// exported type says whether it is safe for concurrent use: each exported
// struct or interface type of the module's public packages (all but
// internal/, cmd/, examples/ and testdata) must say so in its doc comment,
// in words that name "concurrent" use or "goroutine"s. Only the source is
// read, so it needs no build and no services.
func TestExportedTypesSayConcurrencySafety(t *testing.T) {
	// The root package's directory is the module's: go test runs its
	// tests there.
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := publicPackageDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatalf("no packages found under %s", root)
	}
	var offenders []string
	for _, dir := range dirs {
		silent, err := typesSilentOnConcurrency(dir)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		if rel == "." {
			rel = "saferetry"
		}
		for _, name := range silent {
			offenders = append(offenders, filepath.ToSlash(rel)+"."+name)
		}
	}
	if len(offenders) > 0 {
		t.Errorf("%d exported struct or interface types do not say whether they are safe for concurrent use (their doc names neither \"concurrent\" nor \"goroutine\"):\n\t%s",
			len(offenders), strings.Join(offenders, "\n\t"))
	}
}

// publicPackageDirs lists the directories under root that hold non-test Go
// files, leaving out internal/, cmd/ and examples/ at the top, every
// testdata directory and hidden or underscored ones, which the go command
// ignores too.
func publicPackageDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != root {
			name := d.Name()
			rel, _ := filepath.Rel(root, path)
			switch {
			case name == "testdata", strings.HasPrefix(name, "."), strings.HasPrefix(name, "_"),
				rel == "internal", rel == "cmd", rel == "examples":
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		files, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil {
			return err
		}
		if slices.ContainsFunc(files, isPackageFile) {
			dirs = append(dirs, path)
		}
		return nil
	})
	return dirs, err
}

func isPackageFile(path string) bool {
	return !strings.HasSuffix(path, "_test.go")
}

// typesSilentOnConcurrency parses the non-test files of the package in dir
// and returns its exported struct and interface types whose doc comment
// mentions neither concurrent use nor goroutines.
func typesSilentOnConcurrency(dir string) ([]string, error) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, path := range paths {
		if !isPackageFile(path) {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	pkg, err := doc.NewFromFiles(fset, files, "example.invalid/"+filepath.Base(dir))
	if err != nil {
		return nil, err
	}
	var silent []string
	for _, typ := range pkg.Types {
		if !isStructOrInterface(typ) {
			continue
		}
		d := strings.ToLower(typ.Doc)
		if !strings.Contains(d, "concurrent") && !strings.Contains(d, "goroutine") {
			silent = append(silent, typ.Name)
		}
	}
	return silent, nil
}

// isStructOrInterface reports whether typ is declared as a struct or an
// interface, not as a function, a basic type or another named type.
func isStructOrInterface(typ *doc.Type) bool {
	for _, spec := range typ.Decl.Specs {
		if ts, ok := spec.(*ast.TypeSpec); ok && ts.Name.Name == typ.Name {
			switch ts.Type.(type) {
			case *ast.StructType, *ast.InterfaceType:
				return true
			}
		}
	}
	return false
}
