// Package lint holds repository-wide checks: every package has a doc
// comment, packages import only what their layer allows, make test cannot
// pass without the parts the tests need (makefile_test.go), and the
// documentation (README.md, docs/) stands alone and stays true to the code
// (docs_test.go).
package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func root(t *testing.T) string {
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// packages returns every non-test package directory with its files parsed.
func packages(t *testing.T) map[string][]string {
	out := map[string][]string{}
	r := root(t)
	filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "bench" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != r {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			rel, _ := filepath.Rel(r, filepath.Dir(p))
			out[rel] = append(out[rel], p)
		}
		return nil
	})
	return out
}

func TestEveryPackageHasADocComment(t *testing.T) {
	for dir, files := range packages(t) {
		documented := false
		for _, f := range files {
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Fatal(err)
			}
			if af.Doc != nil && strings.TrimSpace(af.Doc.Text()) != "" {
				documented = true
			}
		}
		if !documented {
			t.Errorf("package %s has no doc comment", dir)
		}
	}
}

// TestImportBoundaries keeps the layers apart: pure and low-level packages
// must not reach up into wiring, HTTP or engines. The leaves (internal/text,
// internal/secret, internal/credential, internal/runproto: the standard
// library only) are open to all, and stay leaves.
func TestImportBoundaries(t *testing.T) {
	// Leaves: packages of the standard library only, open to all.
	// internal/runproto, the runner protocol's wire, is one too: Core's run
	// domain and HTTP routes and the runner's packages all import it, so
	// that no body is written twice; it may therefore import nothing of
	// Ballet's (the runner must not reach Core through it) and no HTTP.
	leaves := []string{"github.com/ballet/ballet/internal/text", "github.com/ballet/ballet/internal/secret",
		"github.com/ballet/ballet/internal/credential", "github.com/ballet/ballet/internal/runproto"}
	coreInternals := []string{"internal/store", "internal/store/sqlite", "internal/store/rqlite", "internal/transition", "internal/job",
		"internal/event", "internal/core", "internal/server", "internal/flow", "internal/run", "internal/tenancy", "internal/tracker",
		"internal/skill", "internal/pipeline/versions", "internal/auth", "internal/access", "internal/reconcile", "internal/schedule"}
	runner := append(slices.Clone(coreInternals), "net/http")
	coreOnly := []string{"internal/core", "internal/server", "internal/flow", "internal/run", "internal/tenancy", "internal/tracker",
		"internal/skill", "internal/pipeline/versions", "internal/auth", "internal/access", "internal/reconcile", "internal/schedule", "internal/job"}
	forbidden := map[string][]string{
		"internal/store":      {"internal/store/sqlite", "internal/store/rqlite", "internal/transition", "internal/job", "internal/event", "net/http"},
		"internal/event":      {"internal/store/sqlite", "internal/store/rqlite", "internal/job", "internal/transition", "net/http"},
		"internal/job":        {"internal/store/sqlite", "internal/store/rqlite", "internal/transition", "internal/core", "net/http"},
		"internal/transition": {"internal/store/sqlite", "internal/store/rqlite", "internal/core", "net/http"},
		"internal/keys":       {"internal/store/sqlite", "internal/store/rqlite", "net/http"},
		"internal/clock":      {"github.com/ballet/ballet/"},
		"internal/text":       {"github.com/ballet/ballet/"},
		"internal/secret":     {"github.com/ballet/ballet/"},
		"internal/credential": {"github.com/ballet/ballet/"},
		"internal/runproto":   {"github.com/ballet/ballet/", "net/http"},
		// A session's log read as a transcript: the runner protocol's
		// wire and the standard library only.
		"internal/transcript": append(slices.Clone(coreInternals), "internal/runner", "net/http"),
		"internal/pipeline":   {"github.com/ballet/ballet/", "net/http"},
		"internal/forge":      {"github.com/ballet/ballet/", "net/http"},
		"internal/flow":       {"internal/store/sqlite", "internal/store/rqlite", "internal/server", "internal/core", "net/http"},
		"internal/config":     {"github.com/ballet/ballet/"},

		// The Runner's machinery stands apart from Core: it talks to Core
		// over HTTP (the runner protocol), never through its internals.
		"internal/runner/proc":      runner,
		"internal/runner/sandbox":   runner,
		"internal/runner/workspace": runner,
		"internal/runner/agent":     runner,
		// Only these two speak HTTP: to Core, the runner protocol.
		"internal/runner/protocol": coreInternals,
		"internal/runner":          coreInternals,
		// Core's Knowledge client speaks only the service's API.
		"internal/knowledge/client":            coreInternals,
		"internal/knowledge/client/clientfake": coreInternals,

		// Domain packages: below HTTP, wiring and the flow engine; tenancy
		// below the tracker.
		"internal/tenancy":           {"internal/tracker", "internal/flow", "internal/server", "internal/core", "net/http"},
		"internal/tracker":           {"internal/flow", "internal/server", "internal/core", "net/http"},
		"internal/skill":             {"internal/tracker", "internal/flow", "internal/server", "internal/core", "net/http"},
		"internal/pipeline/versions": {"internal/tracker", "internal/flow", "internal/server", "internal/core", "net/http"},
		"internal/run":               {"internal/flow", "internal/server", "internal/core", "net/http"},
		"internal/auth":              {"internal/server", "internal/core", "net/http"},
		// The Knowledge service stands apart from Core: it reads its own
		// database and learns callers' roles from Core over HTTP only.
		"internal/knowledge":         append(slices.Clone(coreOnly), "net/http"),
		"internal/knowledge/service": coreOnly,
		// The realtime door stands beside the REST API, not on it: what
		// both need on the wire is in the door kit (internal/door).
		"internal/realtime": {"internal/server", "internal/core"},
		// The MCP door is one route of Core's table, on the domains'
		// services through the interfaces it declares: no storage, no wiring.
		"internal/mcp": {"internal/store", "internal/store/sqlite", "internal/store/rqlite", "internal/core"},
	}
	for dir, files := range packages(t) {
		bad, ok := forbidden[dir]
		if !ok {
			continue
		}
		for _, f := range files {
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				path := strings.Trim(imp.Path.Value, `"`)
				if slices.Contains(leaves, path) {
					continue // pure itself: any package may use it
				}
				for _, b := range bad {
					if path == b || strings.HasSuffix(path, "/"+b) || (strings.HasSuffix(b, "/") && strings.HasPrefix(path, b)) {
						t.Errorf("%s imports %s", f, path)
					}
				}
			}
		}
	}
}

// TestNoBuildUsesTheTestForge: the ballet_testforge build tag (a plain-git
// forge on which Ballet merges, gitforge.Merging) is for the failure suite
// and the restart test, which build their binary in Go test code. No build
// script, Makefile or CI step may pass it, so no production binary has it.
func TestNoBuildUsesTheTestForge(t *testing.T) {
	r := root(t)
	checked := 0
	err := filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if (d.Name() == ".git" || d.Name() == "testdata" || p == filepath.Join(r, "data")) && p != r {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".md") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		checked++
		if strings.Contains(string(b), "ballet_testforge") {
			t.Errorf("%s mentions the ballet_testforge build tag: only Go test code may build with it", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no build file was checked")
	}
}

// TestJobsAreTyped: outside package job and tests, a job is enqueued from
// its arguments (job.New of a job.Args type), never from a hand-written
// job.Spec, so that its payload is written as the type its handler reads
// (job.Register).
func TestJobsAreTyped(t *testing.T) {
	for dir, files := range packages(t) {
		if dir == "internal/job" {
			continue
		}
		for _, f := range files {
			for _, pos := range specLiterals(t, f, nil) {
				t.Errorf("%s: a job.Spec written by hand: build it with job.New from the job's Args", pos)
			}
		}
	}
	// A planted one is found, in both forms.
	planted := `package p
import "github.com/ballet/ballet/internal/job"
var a = job.Spec{Kind: "k"}
var b = []job.Spec{{Kind: "k"}}
var c = job.New(nil)
`
	if got := specLiterals(t, "planted.go", []byte(planted)); len(got) != 2 {
		t.Errorf("planted job.Spec literals: found %v, want 2", got)
	}
}

// specLiterals returns the positions of job.Spec composite literals in a
// file (src nil: read it).
func specLiterals(t *testing.T, path string, src []byte) []string {
	t.Helper()
	fset := token.NewFileSet()
	var in any // the file itself
	if src != nil {
		in = src
	}
	af, err := parser.ParseFile(fset, path, in, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := ""
	for _, imp := range af.Imports {
		if strings.Trim(imp.Path.Value, `"`) == "github.com/ballet/ballet/internal/job" {
			name = "job"
			if imp.Name != nil {
				name = imp.Name.Name
			}
		}
	}
	if name == "" {
		return nil
	}
	isSpec := func(e ast.Expr) bool {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Spec" {
			return false
		}
		x, ok := sel.X.(*ast.Ident)
		return ok && x.Name == name
	}
	var out []string
	ast.Inspect(af, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		if isSpec(lit.Type) {
			out = append(out, fset.Position(lit.Pos()).String())
		}
		var elem ast.Expr // the element type of a slice, array or map literal
		switch typ := lit.Type.(type) {
		case *ast.ArrayType:
			elem = typ.Elt
		case *ast.MapType:
			elem = typ.Value
		}
		if elem != nil && isSpec(elem) {
			for _, e := range lit.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					e = kv.Value
				}
				if c, ok := e.(*ast.CompositeLit); ok && c.Type == nil {
					out = append(out, fset.Position(c.Pos()).String())
				}
			}
		}
		return true
	})
	return out
}

// TestShippedCodeImportsNoKit keeps the test scaffolding out of the product:
// internal/testkit holds the kits that build worlds for tests (a whole Core
// API, real rqlite, Gitea, Chromium, the failure suite), and the fakes that
// stand next to the interface they implement (forge/forgetest,
// forge/githubfake, knowledge/client/clientfake, runner/sandbox/sandboxtest)
// are kits too. No non-test file outside the kits imports one, and the
// binary's whole dependency list (go list -deps ./cmd/ballet) holds none.
// The benchmark module (bench/) is not shipped and may use them.
func TestShippedCodeImportsNoKit(t *testing.T) {
	isKit := func(pkg string) bool {
		pkg = strings.TrimPrefix(pkg, "github.com/ballet/ballet/")
		base := pkg[strings.LastIndex(pkg, "/")+1:]
		return strings.HasPrefix(pkg, "internal/testkit/") || strings.HasSuffix(base, "test") || strings.HasSuffix(base, "fake")
	}
	for dir, files := range packages(t) {
		if isKit(dir) {
			continue
		}
		for _, f := range files {
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				path := strings.Trim(imp.Path.Value, `"`)
				if strings.HasPrefix(path, "github.com/ballet/ballet/") && isKit(path) {
					t.Errorf("%s imports the test kit %s: only tests and other kits may", f, path)
				}
			}
		}
	}
	cmd := exec.Command("go", "list", "-deps", "./cmd/ballet")
	cmd.Dir = root(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/ballet: %v", err)
	}
	n := 0
	for _, pkg := range strings.Fields(string(out)) {
		if !strings.HasPrefix(pkg, "github.com/ballet/ballet/") {
			continue
		}
		n++
		if isKit(pkg) {
			t.Errorf("the ballet binary depends on the test kit %s", pkg)
		}
	}
	if n < 20 {
		t.Fatalf("go list -deps ./cmd/ballet listed %d of Ballet's packages: the check saw nothing", n)
	}
}

// TestOneWayToStopAChildTree: a child's process group is made and
// signalled only by package procgroup (the runner's agent sessions lead a
// session of their own, package runner/proc, and are signalled through
// procgroup too), so that no stop forgets the grandchildren.
func TestOneWayToStopAChildTree(t *testing.T) {
	for dir, files := range packages(t) {
		if dir == "internal/procgroup" {
			continue
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, bad := range []string{"Setpgid", "Kill(-", "Pdeathsig: syscall.SIGTERM"} {
				if strings.Contains(string(b), bad) {
					t.Errorf("%s uses %s: start and stop a child's tree with package procgroup", f, bad)
				}
			}
		}
	}
}
