package lint

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/BurntSushi/toml"

	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/config"
	"github.com/ballet/ballet/internal/core"
	"github.com/ballet/ballet/internal/flow"
	"github.com/ballet/ballet/internal/forge"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/reconcile"
	"github.com/ballet/ballet/internal/server"
	"github.com/ballet/ballet/internal/tracker"
)

// The documentation checks: README.md and docs/ stand alone in a clone and
// say what the code does where the code can tell.

// docFiles returns the repository's markdown documents by path relative
// to the root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "ARCHITECTURE.md", "bench/README.md"}
	more, err := filepath.Glob(filepath.Join(root(t), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(more) == 0 {
		t.Fatal("docs/ holds no markdown files")
	}
	for _, m := range more {
		rel, _ := filepath.Rel(root(t), m)
		files = append(files, rel)
	}
	return files
}

func readDoc(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// prose returns the lines of a markdown text outside fenced code blocks.
func prose(text string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}

// fences returns the fenced code blocks of a markdown text with the given
// info string ("yaml", "toml").
func fences(text, lang string) []string {
	var out []string
	var cur *strings.Builder
	for _, line := range strings.Split(text, "\n") {
		switch t := strings.TrimSpace(line); {
		case cur == nil && t == "```"+lang:
			cur = &strings.Builder{}
		case cur != nil && t == "```":
			out = append(out, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return out
}

// slug is the anchor GitHub gives a heading.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func anchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, line := range prose(text) {
		if strings.HasPrefix(line, "#") {
			out[slug(strings.TrimLeft(line, "#"))] = true
		}
	}
	return out
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsStandAlone: a clone has the repository and nothing beside it, so
// no document may send its reader outside it, and every relative link and
// anchor must lead somewhere.
func TestDocsStandAlone(t *testing.T) {
	for _, rel := range docFiles(t) {
		text := readDoc(t, rel)
		for _, outside := range []string{"../shared", "shared/spec", "/work/"} {
			if strings.Contains(text, outside) {
				t.Errorf("%s refers to %q, which a clone does not have", rel, outside)
			}
		}
		for _, line := range prose(text) {
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				file := filepath.Join(filepath.Dir(rel), path)
				if path == "" {
					file = rel
				}
				if _, err := os.Stat(filepath.Join(root(t), file)); err != nil {
					t.Errorf("%s links to %s, which does not exist", rel, target)
					continue
				}
				if anchor != "" && !anchors(readDoc(t, file))[anchor] {
					t.Errorf("%s links to %s: %s has no heading with the anchor #%s", rel, target, file, anchor)
				}
			}
		}
	}
}

// TestReadmeConfigurationIsTheDefaults: the README's configuration block
// lists every key with its default value.
func TestReadmeConfigurationIsTheDefaults(t *testing.T) {
	text := readDoc(t, "README.md")
	_, section, ok := strings.Cut(text, "\n## Configuration\n")
	blocks := fences(section, "toml")
	if !ok || len(blocks) == 0 {
		t.Fatal("README.md has no ```toml block under \"## Configuration\"")
	}
	block := blocks[0]
	got, err := config.Parse(block, "README.md")
	if err != nil {
		t.Fatalf("the README's configuration block does not parse: %v", err)
	}
	if want := config.Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("the README's configuration block differs from the defaults:\nREADME:  %+v\ndefault: %+v", got, want)
	}
	var out bytes.Buffer
	if err := config.Write(&out, config.Default()); err != nil {
		t.Fatal(err)
	}
	if gk, wk := tomlKeys(t, block), tomlKeys(t, out.String()); !slices.Equal(gk, wk) {
		t.Errorf("the README's configuration block lists the keys\n%v\n`ballet config` prints\n%v", gk, wk)
	}
}

// tomlKeys returns the dotted keys of a TOML document, sorted.
func tomlKeys(t *testing.T, doc string) []string {
	t.Helper()
	var m map[string]any
	if _, err := toml.Decode(doc, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for table, v := range m {
		for k := range v.(map[string]any) {
			keys = append(keys, table+"."+k)
		}
	}
	sort.Strings(keys)
	return keys
}

// TestTemplateIsDocumented: the template's stages as the README and
// docs/pipelines.md name them, and the whole template in docs/pipelines.md,
// are the template's.
func TestTemplateIsDocumented(t *testing.T) {
	tpl := pipeline.Template()
	var ids []string
	for _, s := range tpl.Stages {
		ids = append(ids, s.ID)
	}
	chain := strings.Join(ids, " → ")
	for _, rel := range []string{"README.md", "docs/pipelines.md"} {
		if text := strings.Join(strings.Fields(readDoc(t, rel)), " "); !strings.Contains(text, chain) {
			t.Errorf("%s does not name the template's stages as %q", rel, chain)
		}
	}
	y, err := pipeline.Render(tpl)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(fences(readDoc(t, "docs/pipelines.md"), "yaml"), string(y)) {
		t.Errorf("docs/pipelines.md does not show the template as `ballet pipeline render --template` prints it:\n%s", y)
	}
}

// TestPipelineExamplesValidate: every pipeline shown in the docs is one
// Ballet accepts.
func TestPipelineExamplesValidate(t *testing.T) {
	n := 0
	for _, rel := range docFiles(t) {
		for _, block := range fences(readDoc(t, rel), "yaml") {
			if !strings.Contains(block, "stages:") {
				continue
			}
			n++
			if _, problems := pipeline.Parse([]byte(block)); len(problems) > 0 {
				t.Errorf("a pipeline in %s has problems: %v\n%s", rel, problems, block)
			}
		}
	}
	if n == 0 {
		t.Error("no pipeline example found in the docs")
	}
}

// TestAPIDocListsEveryRoute: docs/api.md's table of routes is Core's route
// table, with each route's permission.
func TestAPIDocListsEveryRoute(t *testing.T) {
	cfg := config.Default()
	cfg.Storage.Path = filepath.Join(t.TempDir(), "core.db")
	cfg.Auth.BootstrapToken = "lint-bootstrap-token-0123456789"
	c, err := core.Open(context.Background(), core.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := map[string]bool{}
	for _, rt := range c.API.Routes() {
		want[fmt.Sprintf("| `%s %s` | `%s` |", rt.Method, rt.Path, rt.Perm)] = true
	}
	rowRE := regexp.MustCompile("^\\| `(GET|POST|PUT|PATCH|DELETE) /api/v1/[^`]*` \\| `[a-z.]+` \\|$")
	got := map[string]bool{}
	for _, line := range prose(readDoc(t, "docs/api.md")) {
		if rowRE.MatchString(line) {
			got[line] = true
		}
	}
	for row := range want {
		if !got[row] {
			t.Errorf("docs/api.md lacks the route row %s", row)
		}
	}
	for row := range got {
		if !want[row] {
			t.Errorf("docs/api.md lists %s, which is not a route with that permission", row)
		}
	}
}

// TestDocsNameEveryValue: the values a client sees are all explained.
func TestDocsNameEveryValue(t *testing.T) {
	var statuses, waits []string
	for _, s := range flow.States {
		statuses = append(statuses, s.Status)
		if s.Waiting != "" {
			waits = append(waits, s.Waiting)
		}
	}
	for _, c := range []struct {
		doc, what string
		values    []string
	}{
		{"docs/flows.md", "flow status", statuses},
		{"docs/flows.md", "what a flow waits for", waits},
		{"docs/flows.md", "attention", flow.Attentions},
		{"docs/flows.md", "ticket state", tracker.States},
		{"docs/flows.md", "reconciler rule", reconcile.Rules},
		{"docs/operations.md", "reconciler rule", reconcile.Rules},
		{"docs/pipelines.md", "outcome", pipeline.Outcomes()},
		{"docs/events.md", "event type", server.EventTypes()},
	} {
		text := readDoc(t, c.doc)
		for _, v := range c.values {
			if !strings.Contains(text, "`"+v+"`") {
				t.Errorf("%s does not name the %s `%s`", c.doc, c.what, v)
			}
		}
	}
}

// TestMakeRunDoesNotBuildRqlited: `make run` starts Ballet (ballet up) and nothing else;
// only the targets that start rqlite nodes build rqlited (about 90 s the
// first time). A fake go on PATH makes the check instant: building rqlited
// would announce itself through scripts/rqlited.sh.
func TestMakeRunDoesNotBuildRqlited(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is required (apt-get install make): %v", err)
	}
	bin, cache := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte("#!/bin/sh\necho \"fake go $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "--no-print-directory", "-C", root(t), "run")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BALLET_RQLITED=") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "XDG_CACHE_HOME=") &&
			!strings.HasPrefix(kv, "MAKEFLAGS=") && !strings.HasPrefix(kv, "MAKELEVEL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "XDG_CACHE_HOME="+cache)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "fake go run ./cmd/ballet up") {
		t.Errorf("make run did not run `go run ./cmd/ballet up`:\n%s", out)
	}
	if strings.Contains(string(out), "rqlited") {
		t.Errorf("make run builds rqlited:\n%s", out)
	}
	if entries, _ := os.ReadDir(cache); len(entries) > 0 {
		t.Errorf("make run wrote into the cache (%s): it builds rqlited", cache)
	}
}

// TestGeneratedFilesAreIgnored: what Core and the README's recipes create
// in a checkout (the data folder, wherever Core or a test ran; the built
// binaries, Core's and the bench program's) is ignored by git, and none of
// it is committed: no data folder, no executable.
func TestGeneratedFilesAreIgnored(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is required (apt-get install git): %v", err)
	}
	r := root(t)
	if err := exec.Command("git", "-C", r, "rev-parse", "--is-inside-work-tree").Run(); err != nil {
		t.Fatalf("%s is not a git checkout, so what git ignores cannot be checked: %v", r, err)
	}
	for _, p := range []string{
		"data/core.db", "data/bootstrap-token", "data/cluster/core-a.toml", "data/pipeline.yaml",
		"internal/core/data/bootstrap-token", "cmd/ballet/data/core.db", "bin/ballet", "bench/bench",
	} {
		if err := exec.Command("git", "-C", r, "check-ignore", "-q", "--no-index", "--", p).Run(); err != nil {
			t.Errorf("git does not ignore %s", p)
		}
	}
	out, err := exec.Command("git", "-C", r, "ls-files").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f == "data" || strings.HasPrefix(f, "data/") || strings.Contains(f, "/data/") {
			t.Errorf("%s is committed: files under a data folder are what Core generates", f)
		}
		if isExecutable(t, filepath.Join(r, f)) {
			t.Errorf("%s is committed: it is a built executable", f)
		}
	}
}

// isExecutable reports whether the file is a built executable (ELF, Mach-O,
// PE); a file missing from the working tree is not.
func isExecutable(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return false
		}
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, 4)
	if _, err := io.ReadFull(f, head); err != nil {
		return false // shorter than any executable
	}
	for _, magic := range [][]byte{{0x7f, 'E', 'L', 'F'}, {0xcf, 0xfa, 0xed, 0xfe}, {'M', 'Z'}} {
		if bytes.HasPrefix(head, magic) {
			return true
		}
	}
	return false
}

// TestDocsSayWhoMerges: docs/flows.md's table of who merges on each forge
// is the forges' own answer (forge.Forge.CanMerge), for every forge kind a
// repository may name — it once said a merge stage on Gitea or GitHub
// fails for good, long after Ballet merged there.
func TestDocsSayWhoMerges(t *testing.T) {
	forges := core.Forges(t.TempDir(), clock.Real{})
	rowRE := regexp.MustCompile("^\\| `([a-z]+)` \\| (Ballet|a person)[,:]")
	rows := map[string]string{}
	for _, line := range prose(readDoc(t, "docs/flows.md")) {
		if m := rowRE.FindStringSubmatch(line); m != nil {
			rows[m[1]] = m[2]
		}
	}
	for _, kind := range forge.Kinds {
		f, err := forges(kind)
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{true: "Ballet", false: "a person"}[f.CanMerge()]
		if got, ok := rows[kind]; !ok || got != want {
			t.Errorf("docs/flows.md says %q merges on `%s`, want %q", got, kind, want)
		}
		delete(rows, kind)
	}
	for kind := range rows {
		t.Errorf("docs/flows.md names a forge `%s` that a repository cannot name", kind)
	}
}

// TestDocsListEveryHistory: docs/events.md's table of histories is the
// routes that answer a page of events, no more and no less.
func TestDocsListEveryHistory(t *testing.T) {
	cfg := config.Default()
	cfg.Storage.Path = filepath.Join(t.TempDir(), "core.db")
	cfg.Auth.BootstrapToken = "lint-bootstrap-token-0123456789"
	c, err := core.Open(context.Background(), core.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := map[string]bool{}
	for _, rt := range c.API.Routes() {
		if _, ok := rt.Response.(server.EventPage); ok {
			want[rt.Method+" "+rt.Path] = true
		}
	}
	rowRE := regexp.MustCompile("^\\| `(GET /api/v1/[^`]*)` \\|")
	text := readDoc(t, "docs/events.md")
	start := strings.Index(text, "## Reading the log")
	if start < 0 {
		t.Fatal("docs/events.md has no section Reading the log")
	}
	section, _, _ := strings.Cut(text[start+1:], "\n## ")
	got := map[string]bool{}
	for _, line := range prose(section) {
		if m := rowRE.FindStringSubmatch(line); m != nil {
			got[m[1]] = true
		}
	}
	for r := range want {
		if !got[r] {
			t.Errorf("docs/events.md (Reading the log) lacks the history `%s`", r)
		}
	}
	for r := range got {
		if !want[r] {
			t.Errorf("docs/events.md (Reading the log) lists `%s`, which answers no page of events", r)
		}
	}
}
