package lint

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// tableOwners is the one list of who writes which table: a table's owner
// is the only package whose SQL inserts, updates, deletes or replaces its
// rows. Others change it through the owner's builders (ARCHITECTURE.md,
// "Table owners", which TestArchitectureListsTheTableOwners keeps equal to
// this list). The migrations (internal/store) own every table's schema and
// are exempt.
var tableOwners = map[string]string{
	"organizations":         "internal/tenancy",
	"projects":              "internal/tenancy",
	"memberships":           "internal/tenancy",
	"member_versions":       "internal/tenancy",
	"platform":              "internal/tenancy",
	"items":                 "internal/tracker",
	"blockers":              "internal/tracker",
	"graph_versions":        "internal/tracker",
	"questions":             "internal/tracker",
	"skills":                "internal/skill",
	"skill_versions":        "internal/skill",
	"pipeline_versions":     "internal/pipeline/versions",
	"flows":                 "internal/flow",
	"provider_limits":       "internal/flow",
	"runs":                  "internal/run",
	"runners":               "internal/run",
	"run_logs":              "internal/run",
	"tokens":                "internal/auth",
	"sessions":              "internal/auth",
	"jobs":                  "internal/job",
	"events":                "internal/event",
	"key_counters":          "internal/keys",
	"leader_leases":         "internal/leader",
	"race_guard":            "internal/transition",
	"schema_migrations":     "internal/store",
	"event_cursors":         "internal/consumer",
	"notifications":         "internal/notify",
	"notification_settings": "internal/notify",
	// A ticket's subscribers (issue 26).
	"item_subscriptions": "internal/notify",
	"digests":            "internal/digest",
	"webhooks":           "internal/webhook",
	"webhook_deliveries": "internal/webhook",
	"mail_deliveries":    "internal/notify",
	"notify_keys":        "internal/notify",
	// The Knowledge service's own database (internal/knowledge/migrations).
	"spaces":         "internal/knowledge",
	"entries":        "internal/knowledge",
	"entry_versions": "internal/knowledge",
	"entry_search":   "internal/knowledge",
}

// readModels are the named read models: the packages whose queries read
// tables that others own on purpose, because one joined query is the
// point. Everyone else reads a table through its owner's reads.
// ARCHITECTURE.md lists them ("Read models", which
// TestArchitectureListsTheReadModels keeps equal to this list).
var readModels = map[string][]string{
	"internal/access":              {"memberships"},                                                                                                   // a principal's roles (Check)
	"internal/budget":              {"runs"},                                                                                                          // spend rollups
	"internal/core":                {"schema_migrations"},                                                                                             // the readiness probe
	"internal/event":               {"flows", "questions", "runs"},                                                                                    // an item's history (ItemHistory)
	"internal/testkit/failuretest": {"blockers", "events", "flows", "items", "jobs", "runs"},                                                          // the failure suite's checks
	"internal/flow":                {"events", "runs", "runners"},                                                                                     // attention: a queued run's age, live runners with its adapter, a flag's event
	"internal/needsme":             {"flows", "items", "mail_deliveries", "organizations", "projects", "questions", "webhook_deliveries", "webhooks"}, // what waits for a person, across projects, and failing delivery channels
	"internal/reconcile":           {"flows", "items", "platform", "projects", "questions", "runs"},                                                   // the reconciler's scans
	"internal/run":                 {"items", "provider_limits"},                                                                                      // a run's ticket key; a lease skips adapters under a provider limit
	"internal/schedule":            {"blockers", "flows", "items", "platform", "projects"},                                                            // the runnable query
	"internal/knowledge/service":   {"schema_migrations"},                                                                                             // the Knowledge service's readiness probe
	"internal/digest":              {"notification_settings"},                                                                                         // who gets a digest, when, at which confirmed address
}

// schemaOwner writes every table's schema (the migrations) and is exempt.
const schemaOwner = "internal/store"

// TestEveryTableHasOneOwner: every table the migrations create is in
// tableOwners, and tableOwners names no table they do not create.
func TestEveryTableHasOneOwner(t *testing.T) {
	tables := schemaTables(t)
	for _, tbl := range tables {
		if _, ok := tableOwners[tbl]; !ok {
			t.Errorf("table %s (internal/store/migrations) has no owner in tableOwners", tbl)
		}
	}
	for tbl := range tableOwners {
		if tbl != "schema_migrations" && !slices.Contains(tables, tbl) {
			t.Errorf("tableOwners names %s, a table no migration creates", tbl)
		}
	}
}

// TestOnlyTheOwnerWritesATable reads the SQL in every non-test Go file and
// fails where a package writes a table it does not own. The developer tools
// (tools/) write no table: their SQL keywords are text they look for (the
// mutation tool's SQL mutators), not statements.
func TestOnlyTheOwnerWritesATable(t *testing.T) {
	writes := 0
	for dir, files := range packages(t) {
		if dir == schemaOwner || strings.HasPrefix(dir, "tools"+string(filepath.Separator)) {
			continue
		}
		for _, w := range sqlWrites(t, files, nil) {
			writes++
			if problem := w.check(dir); problem != "" {
				t.Error(problem)
			}
		}
	}
	if writes < len(tableOwners)-1 {
		t.Fatalf("found %d SQL writes in the tree: the checker reads nothing", writes)
	}
}

// TestOthersTablesAreReadInNamedReadModelsOnly: a package's SQL reads
// another's table only where readModels names it, and every table
// readModels names is still read there (so the list stays true).
func TestOthersTablesAreReadInNamedReadModelsOnly(t *testing.T) {
	for dir, files := range packages(t) {
		reads := sqlReads(t, files, nil)
		for _, tbl := range slices.Sorted(maps.Keys(reads)) {
			if problem := readProblem(dir, tbl, reads[tbl]); problem != "" {
				t.Error(problem)
			}
		}
		for _, tbl := range readModels[dir] {
			if _, ok := reads[tbl]; !ok {
				t.Errorf("readModels says %s reads %s, but none of its queries does: drop it from readModels and ARCHITECTURE.md", dir, tbl)
			}
		}
	}
	// A planted scan of another's table is found.
	planted := "package p\nconst q = `SELECT id, slug FROM organizations WHERE slug = ? OR id = ?`\n"
	reads := sqlReads(t, []string{"planted.go"}, []byte(planted))
	if readProblem("internal/auth", "organizations", reads["organizations"]) == "" {
		t.Errorf("a planted read of organizations in internal/auth is not found: %v", reads)
	}
}

// readProblem says what is wrong with package dir's reads of tbl at.
func readProblem(dir, tbl string, at []string) string {
	if tableOwners[tbl] == dir || slices.Contains(readModels[dir], tbl) {
		return ""
	}
	return fmt.Sprintf("%s reads %s (owned by %s) at %s: use the owner's reads, or name a read model (readModels, ARCHITECTURE.md)",
		dir, tbl, tableOwners[tbl], strings.Join(at, ", "))
}

// TestOwnershipCheckCatchesAPlantedWriter runs the checker on a small
// package that writes tables it does not own, in every form it reads.
func TestOwnershipCheckCatchesAPlantedWriter(t *testing.T) {
	planted := `package p

const table = "jobs"
const requeue = ` + "`INSERT INTO jobs (id) VALUES (?)`" + `

func f(name string) []string {
	return []string{
		"UPDATE tokens SET revoked_at = ? WHERE id = ?",
		` + "`\n\tdelete from\n\tflows WHERE id = ?`" + `,
		"REPLACE INTO " + "runs (id) VALUES (?)",
		"INSERT OR IGNORE INTO " + table + " (id) VALUES (?)",
		"UPDATE " + name + " SET x = 1",
		"INSERT INTO items (id) VALUES (?) ON CONFLICT (id) DO UPDATE SET x = 1",
		"INSERT INTO flows (id) VALUES (?)",
		"update failed: the item changed",
		"SELECT id FROM jobs WHERE kind = ?",
	}
}
`
	var got []string
	for _, w := range sqlWrites(t, []string{"planted.go"}, []byte(planted)) {
		if p := w.check("internal/flow"); p != "" {
			got = append(got, w.table)
		}
	}
	want := []string{"jobs", "tokens", "runs", "jobs", "", "items"}
	if !slices.Equal(got, want) {
		t.Errorf("planted writes of others' tables: found %q, want %q", got, want)
	}
}

// TestArchitectureListsTheTableOwners: ARCHITECTURE.md's "Table owners"
// table says what tableOwners says.
func TestArchitectureListsTheTableOwners(t *testing.T) {
	listed := map[string]string{}
	for _, row := range docTable(t, "Table owners") {
		for _, tbl := range names(row[0]) {
			if prev, dup := listed[tbl]; dup {
				t.Errorf("ARCHITECTURE.md, Table owners: %s is listed twice (%s, %s)", tbl, prev, row[1])
			}
			listed[tbl] = strings.Trim(row[1], "`")
		}
	}
	for _, tbl := range slices.Sorted(maps.Keys(tableOwners)) {
		if listed[tbl] != tableOwners[tbl] {
			t.Errorf("ARCHITECTURE.md, Table owners: %s is owned by %q, not %q (tableOwners, internal/lint/owners_test.go)", tbl, tableOwners[tbl], listed[tbl])
		}
	}
	for tbl := range listed {
		if _, ok := tableOwners[tbl]; !ok {
			t.Errorf("ARCHITECTURE.md, Table owners: %s is not in tableOwners (internal/lint/owners_test.go)", tbl)
		}
	}
}

// TestArchitectureListsTheReadModels: ARCHITECTURE.md's "Read models"
// table names the packages and tables readModels names.
func TestArchitectureListsTheReadModels(t *testing.T) {
	listed := map[string][]string{}
	for _, row := range docTable(t, "Read models") {
		listed[strings.Trim(row[0], "`")] = names(row[1])
	}
	for _, dir := range slices.Sorted(maps.Keys(readModels)) {
		if want, got := slices.Sorted(slices.Values(readModels[dir])), slices.Sorted(slices.Values(listed[dir])); !slices.Equal(got, want) {
			t.Errorf("ARCHITECTURE.md, Read models: %s reads %v, not %v (readModels, internal/lint/owners_test.go)", dir, want, got)
		}
	}
	for dir := range listed {
		if _, ok := readModels[dir]; !ok {
			t.Errorf("ARCHITECTURE.md, Read models: %s is not in readModels (internal/lint/owners_test.go)", dir)
		}
	}
}

// docTable returns the cells of the body rows of the first table in
// ARCHITECTURE.md's section with the given heading (## or ###).
func docTable(t *testing.T, heading string) [][]string {
	t.Helper()
	doc := readDoc(t, "ARCHITECTURE.md")
	at := regexp.MustCompile(`(?m)^#{2,3} ` + regexp.QuoteMeta(heading) + `\n`).FindStringIndex(doc)
	if at == nil {
		t.Fatalf("ARCHITECTURE.md has no section %q", heading)
	}
	var rows [][]string
	started := false
	for _, line := range strings.Split(doc[at[1]:], "\n") {
		if !strings.HasPrefix(line, "|") {
			if started {
				break
			}
			if strings.HasPrefix(line, "#") {
				break
			}
			continue
		}
		started = true
		cells := strings.Split(strings.Trim(line, "| "), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) < 2 || strings.HasPrefix(cells[0], "---") {
			continue
		}
		rows = append(rows, cells)
	}
	if len(rows) < 2 {
		t.Fatalf("ARCHITECTURE.md, %s: no table found", heading)
	}
	return rows[1:] // the header row
}

// names splits a cell listing names ("`a`, `b`").
func names(cell string) []string {
	var out []string
	for _, n := range strings.Split(cell, ",") {
		out = append(out, strings.Trim(strings.TrimSpace(n), "`"))
	}
	return out
}

// schemaTables returns the tables the migrations create.
func schemaTables(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root(t), "internal", "store", "migrations", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations found: %v", err)
	}
	// The Knowledge service's own schema: race_guard and events again
	// (same owners), its tables besides.
	kfiles, err := filepath.Glob(filepath.Join(root(t), "internal", "knowledge", "migrations", "*.sql"))
	if err != nil || len(kfiles) == 0 {
		t.Fatalf("no knowledge migrations found: %v", err)
	}
	files = append(files, kfiles...)
	// A table a migration creates and a later statement drops (a rebuild's
	// copy) is not in the schema.
	create := regexp.MustCompile(`(?i)\b(CREATE\s+(?:VIRTUAL\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?|DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?)["'` + "`" + `]?(\w+)`)
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range create.FindAllStringSubmatch(string(b), -1) {
			name := strings.ToLower(m[2])
			out = slices.DeleteFunc(out, func(s string) bool { return s == name })
			if strings.HasPrefix(strings.ToUpper(m[1]), "CREATE") {
				out = append(out, name)
			}
		}
	}
	return out
}

// sqlText is a string constant of a Go file: a literal, or a sum of
// literals and the package's named constants, with unknown for the parts
// that are not constants.
type sqlText struct {
	pos  string
	text string
}

// sqlWrite is a write to a table found in a Go string: table is "" where
// the string does not say which (the name is not a constant).
type sqlWrite struct {
	pos   string
	table string
	sql   string
}

// check says what is wrong with the write when package dir makes it.
func (w sqlWrite) check(dir string) string {
	switch owner, ok := tableOwners[w.table]; {
	case w.table == "":
		return w.pos + ": SQL writes a table whose name is not a constant, so its owner cannot be checked: " + w.sql
	case !ok:
		return w.pos + ": SQL writes " + w.table + ", a table without an owner in tableOwners (internal/lint/owners_test.go)"
	case owner != dir:
		return w.pos + ": " + dir + " writes " + w.table + ", which " + owner + " owns: use the owner's builder (ARCHITECTURE.md, Table owners)"
	}
	return ""
}

const quote = `["'` + "`" + `\[\]]?`

// writeSQL matches a statement that writes a table. The keyword is matched
// in any case, but a lower-case one counts only before a known table, so
// that prose ("update failed") is not SQL; DO UPDATE (an upsert's conflict
// clause) writes the INSERT's table, which the INSERT names.
var writeSQL = regexp.MustCompile(`(?i)\b(DO\s+)?(INSERT(?:\s+OR\s+\w+)?\s+INTO|UPDATE(?:\s+OR\s+\w+)?|DELETE\s+FROM|REPLACE\s+INTO)\b\s*(?:` +
	quote + `(\w+)` + quote + `(?:\s*\.\s*` + quote + `(\w+))?)?`)

// readSQL matches a table a query reads (only known tables count).
var readSQL = regexp.MustCompile(`(?i)\b(?:FROM|JOIN)\s+` + quote + `(\w+)`)

// unknown stands in a string for a part that is not a constant.
const unknown = "\x00"

// sqlWrites returns the table writes in the string constants of the given
// files of one package (src, if not nil, is the one file's text).
func sqlWrites(t *testing.T, files []string, src []byte) []sqlWrite {
	t.Helper()
	var out []sqlWrite
	for _, s := range sqlTexts(t, files, src) {
		for _, m := range writeSQL.FindAllStringSubmatch(s.text, -1) {
			if m[1] != "" {
				continue // DO UPDATE
			}
			table := strings.ToLower(m[3])
			if m[4] != "" {
				table = strings.ToLower(m[4]) // schema.table
			}
			keyword := strings.Fields(m[2])[0]
			if _, known := tableOwners[table]; !known && keyword != strings.ToUpper(keyword) {
				continue // prose
			}
			out = append(out, sqlWrite{pos: s.pos, table: table, sql: strings.TrimSpace(m[0])})
		}
	}
	return out
}

// sqlReads returns the known tables that the string constants of the given
// files read, with where (src as for sqlWrites).
func sqlReads(t *testing.T, files []string, src []byte) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, s := range sqlTexts(t, files, src) {
		for _, m := range readSQL.FindAllStringSubmatch(s.text, -1) {
			table := strings.ToLower(m[1])
			if _, known := tableOwners[table]; known && !slices.Contains(out[table], s.pos) {
				out[table] = append(out[table], s.pos)
			}
		}
	}
	return out
}

// sqlTexts returns the string constants of the given files of one package.
func sqlTexts(t *testing.T, files []string, src []byte) []sqlText {
	t.Helper()
	fset := token.NewFileSet()
	var parsed []*ast.File
	for _, f := range files {
		var in any
		if src != nil {
			in = src
		}
		af, err := parser.ParseFile(fset, f, in, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, af)
	}
	consts := map[string]ast.Expr{} // the package's constants, by name (any scope)
	for _, af := range parsed {
		ast.Inspect(af, func(n ast.Node) bool {
			if d, ok := n.(*ast.GenDecl); ok && d.Tok == token.CONST {
				for _, spec := range d.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							consts[name.Name] = vs.Values[i]
						}
					}
				}
			}
			return true
		})
	}
	// eval returns the value of a string expression; read collects the
	// nodes it read.
	var eval func(e ast.Expr, depth int, read map[ast.Expr]bool) (string, bool)
	eval = func(e ast.Expr, depth int, read map[ast.Expr]bool) (string, bool) {
		if read != nil {
			read[e] = true
		}
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind != token.STRING {
				return unknown, false
			}
			return constant.StringVal(constant.MakeFromLiteral(e.Value, e.Kind, 0)), true
		case *ast.ParenExpr:
			return eval(e.X, depth, read)
		case *ast.BinaryExpr:
			if e.Op != token.ADD {
				return unknown, false
			}
			x, okx := eval(e.X, depth, read)
			y, oky := eval(e.Y, depth, read)
			return x + y, okx || oky
		case *ast.Ident:
			if c, ok := consts[e.Name]; ok && depth < 8 {
				return eval(c, depth+1, nil)
			}
		}
		return unknown, false
	}
	var out []sqlText
	for _, af := range parsed {
		done := map[ast.Expr]bool{} // the parts of a sum read whole
		ast.Inspect(af, func(n ast.Node) bool {
			e, ok := n.(ast.Expr)
			if !ok || done[e] {
				return true
			}
			switch e.(type) {
			case *ast.BasicLit, *ast.BinaryExpr:
			default:
				return true
			}
			if s, isString := eval(e, 0, done); isString {
				out = append(out, sqlText{pos: fset.Position(e.Pos()).String(), text: s})
			}
			return true
		})
	}
	return out
}
