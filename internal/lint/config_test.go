package lint

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ballet/ballet/internal/config"
)

// The configuration checks: every key the configuration reference lists
// (README.md's block, which TestReadmeConfigurationIsTheDefaults keeps
// equal to the Config struct) is read by the code it configures. A key
// that is validated and then ignored ([jobs] max_attempts once was) fails.

const configPkg = "github.com/ballet/ballet/internal/config"

// configReaders are config's functions that read every key by design
// (checking or printing the whole configuration): a read there is nobody's
// use of the key.
var configReaders = map[string]bool{"Validate": true, "validate": true, "crossChecks": true, "retentionChecks": true, "Write": true}

// listedPackage is what `go list -json` says of a package.
type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	Standard   bool
	Module     *struct{ Path string }
}

// loadModule type-checks every non-test package of the module from its
// source, with its imports from the build's export data.
func loadModule(t *testing.T) (map[string]*ast.Package, map[string]*types.Info, *token.FileSet) {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-export", "-json=ImportPath,Dir,GoFiles,Export,Standard,Module", "./...")
	cmd.Dir = root(t)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	exports := map[string]string{}
	var mine []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Path == "github.com/ballet/ballet" {
			mine = append(mine, p)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	pkgs, infos := map[string]*ast.Package{}, map[string]*types.Info{}
	for _, p := range mine {
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}, Uses: map[*ast.Ident]types.Object{},
			Types: map[ast.Expr]types.TypeAndValue{}}
		conf := types.Config{Importer: imp.(types.ImporterFrom)}
		if _, err := conf.Check(p.ImportPath, fset, files, info); err != nil {
			t.Fatalf("type-check %s: %v", p.ImportPath, err)
		}
		pkgs[p.ImportPath] = &ast.Package{Name: p.ImportPath, Files: map[string]*ast.File{}}
		for i, f := range files {
			pkgs[p.ImportPath].Files[p.GoFiles[i]] = f
		}
		infos[p.ImportPath] = info
	}
	return pkgs, infos, fset
}

// configName names a config field or function: "Jobs.MaxAttempts",
// "Config.PublicURL", "Load"; "" for what is not config's.
func configName(obj types.Object, recv types.Type) string {
	if obj == nil || obj.Pkg() == nil || obj.Pkg().Path() != configPkg {
		return ""
	}
	if recv == nil {
		return obj.Name()
	}
	if p, ok := recv.(*types.Pointer); ok {
		recv = p.Elem()
	}
	if n, ok := recv.(*types.Named); ok {
		return n.Obj().Name() + "." + obj.Name()
	}
	return ""
}

// configUses is what one function reads of config: fields and config's
// functions it calls.
type configUses struct{ fields, calls map[string]bool }

// readsOf collects the config fields and functions n reads (a field on the
// left of an assignment is written, not read).
func readsOf(n ast.Node, info *types.Info, into configUses) {
	written := map[*ast.SelectorExpr]bool{}
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				if s, ok := l.(*ast.SelectorExpr); ok && n.Tok == token.ASSIGN {
					written[s] = true
				}
			}
		case *ast.CallExpr:
			// A conversion of a config struct to another (agent.Prices(…))
			// reads each of its fields.
			if tv, ok := info.Types[n.Fun]; ok && tv.IsType() && len(n.Args) == 1 {
				if named, ok := info.TypeOf(n.Args[0]).(*types.Named); ok && configName(named.Obj(), nil) != "" {
					if st, ok := named.Underlying().(*types.Struct); ok {
						for i := range st.NumFields() {
							into.fields[named.Obj().Name()+"."+st.Field(i).Name()] = true
						}
					}
				}
			}
		case *ast.SelectorExpr:
			if sel, ok := info.Selections[n]; ok {
				name := configName(sel.Obj(), sel.Recv())
				switch {
				case name == "" || written[n]:
				case sel.Kind() == types.FieldVal:
					into.fields[name] = true
				default:
					into.calls[name] = true
				}
			} else if obj := info.Uses[n.Sel]; obj != nil {
				if _, ok := obj.(*types.Func); ok {
					if name := configName(obj, nil); name != "" {
						into.calls[name] = true
					}
				}
			}
		case *ast.Ident:
			if obj, ok := info.Uses[n].(*types.Func); ok && obj.Pkg() != nil && obj.Pkg().Path() == configPkg {
				if sig, ok := obj.Type().(*types.Signature); ok && sig.Recv() == nil {
					into.calls[obj.Name()] = true
				}
			}
		}
		return true
	})
}

// configKeys returns each key of the configuration (toml path) with the
// Go field that holds it ("jobs.max_attempts" → "Jobs.MaxAttempts").
func configKeys(t reflect.Type, prefix string, out map[string]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		key := prefix + tag
		ft := f.Type
		if ft.Kind() == reflect.Struct && ft.PkgPath() == configPkg && ft != reflect.TypeOf(config.Duration{}) {
			configKeys(ft, key+".", out)
			continue
		}
		out[key] = t.Name() + "." + f.Name
	}
}

// TestEveryConfigKeyIsRead: for every key of the configuration, some code
// outside the config package reads its field, directly or through one of
// config's accessors (Config.PublicURL, Budgets.Location …) that such code
// calls. Validation and printing do not count.
func TestEveryConfigKeyIsRead(t *testing.T) {
	pkgs, infos, _ := loadModule(t)
	byFunc := map[string]configUses{}
	outside := configUses{fields: map[string]bool{}, calls: map[string]bool{}}
	for path, p := range pkgs {
		for _, f := range p.Files {
			if path != configPkg {
				readsOf(f, infos[path], outside)
				continue
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || configReaders[fd.Name.Name] {
					continue
				}
				name := fd.Name.Name
				if fd.Recv != nil {
					recv := fd.Recv.List[0].Type
					if s, ok := recv.(*ast.StarExpr); ok {
						recv = s.X
					}
					name = recv.(*ast.Ident).Name + "." + name
				}
				u := configUses{fields: map[string]bool{}, calls: map[string]bool{}}
				readsOf(fd.Body, infos[path], u)
				byFunc[name] = u
			}
		}
	}
	if len(outside.fields) == 0 {
		t.Fatal("found no read of a config field outside the config package: the check is broken")
	}
	// Config's accessors that code outside calls read what they read.
	read := maps.Clone(outside.fields)
	seen := map[string]bool{}
	queue := slices.Collect(maps.Keys(outside.calls))
	for len(queue) > 0 {
		fn := queue[0]
		queue = queue[1:]
		if seen[fn] {
			continue
		}
		seen[fn] = true
		u := byFunc[fn]
		for f := range u.fields {
			read[f] = true
		}
		for c := range u.calls {
			queue = append(queue, c)
		}
	}
	keys := map[string]string{}
	configKeys(reflect.TypeOf(config.Config{}), "", keys)
	if len(keys) < 50 {
		t.Fatalf("found only %d configuration keys: the walk is broken", len(keys))
	}
	var unread []string
	for key, field := range keys {
		if !read[field] {
			unread = append(unread, fmt.Sprintf("%s (%s)", key, field))
		}
	}
	slices.Sort(unread)
	for _, k := range unread {
		t.Errorf("the configuration key %s is read by no code outside the config package: it is accepted and ignored", k)
	}
}
