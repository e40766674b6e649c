package apitest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/testkit/apitest"
	"github.com/ballet/ballet/internal/testkit/storetest"
)

type pipelineBody struct {
	Project    string              `json:"project"`
	Name       string              `json:"name"`
	Version    int64               `json:"version"`
	Definition pipeline.Definition `json:"definition"`
	CreatedBy  string              `json:"created_by"`
	CreatedAt  *string             `json:"created_at"`
}

func TestPipelinesREST(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		const base = "/api/v1/projects/ACME/pipelines"

		// Before any save: the template is default version 0, without created_at.
		var list struct{ Pipelines []pipelineBody }
		e.Admin(200, "GET", base, nil).JSON(t, &list)
		if len(list.Pipelines) != 1 || list.Pipelines[0].Name != "default" || list.Pipelines[0].Version != 0 || list.Pipelines[0].CreatedAt != nil ||
			list.Pipelines[0].CreatedBy != "ballet" || list.Pipelines[0].Project != "ACME" || len(list.Pipelines[0].Definition.Stages) != 4 {
			t.Fatalf("template listing: %+v", list)
		}
		raw := e.Admin(200, "GET", base+"/default", nil).Map(t)
		for _, f := range []string{"project", "name", "version", "definition", "created_by"} {
			if _, ok := raw[f]; !ok {
				t.Fatalf("GET pipeline lacks %q: %v", f, raw)
			}
		}
		e.Admin(404, "GET", base+"/bug", nil)               // a type without its own pipeline
		e.Admin(400, "GET", base+"/story", nil)             // not a ticket type of the project
		e.Admin(400, "GET", base+"/Bad%20Name", nil)        // not a valid name
		e.Admin(400, "GET", base+"/default?version=x", nil) // bad query

		// Save: based on version 0.
		def := map[string]any{"max_iterations": 2, "stages": []any{
			map[string]any{"id": "implement", "kind": "agent", "instructions": "Do it."},
			map[string]any{"id": "approve", "kind": "human"},
		}}
		var v1 pipelineBody
		e.Admin(200, "PUT", base+"/default", map[string]any{"version": 0, "definition": def}).JSON(t, &v1)
		if v1.Version != 1 || v1.CreatedBy != "bootstrap" || v1.CreatedAt == nil || v1.Definition.MaxIterations != 2 {
			t.Fatalf("saved %+v", v1)
		}
		// Based on a stale version: 409, nothing saved.
		r := e.Admin(409, "PUT", base+"/default", map[string]any{"version": 0, "definition": def})
		if r.ErrorCode() != "conflict" {
			t.Fatalf("stale publish: %s", r.Body)
		}
		e.Admin(409, "PUT", base+"/default", map[string]any{"version": 5, "definition": def}) // a future base is no better
		var v2 pipelineBody
		e.Admin(200, "PUT", base+"/default", map[string]any{"version": 1, "definition": minimalPipeline}).JSON(t, &v2)
		if v2.Version != 2 {
			t.Fatalf("second save %+v", v2)
		}
		// Invalid definition: 400 listing every problem with its path.
		r = e.Admin(400, "PUT", base+"/default", map[string]any{"version": 2, "definition": map[string]any{
			"max_iterations": 50, "stages": []any{map[string]any{"id": "x", "kind": "robot", "next": map[string]any{"done": "nowhere"}}}}})
		var bad struct {
			Error struct {
				Details []pipeline.Problem
			}
		}
		r.JSON(t, &bad)
		paths := map[string]string{}
		for _, p := range bad.Error.Details {
			paths[p.Path] = p.Code
		}
		if paths["max_iterations"] != "max_iterations_range" || paths["stages[0].kind"] != "unknown_kind" {
			t.Fatalf("problems %s", r.Body)
		}
		e.Admin(400, "PUT", base+"/default", map[string]any{"version": 2, "definition": map[string]any{"stages": []any{map[string]any{"id": "a", "kind": "agent", "colour": "red"}}}})
		e.Admin(400, "PUT", base+"/epic", map[string]any{"version": 0, "definition": minimalPipeline}) // epic is not a ticket type
		e.Admin(400, "PUT", base+"/default", map[string]any{"definition": minimalPipeline})            // version missing
		e.Admin(400, "PUT", base+"/default", map[string]any{"version": 2, "definition": "stages: []"}) // YAML is not JSON

		// A ticket type's own pipeline.
		e.Admin(200, "PUT", base+"/bug", map[string]any{"version": 0, "definition": minimalPipeline})
		e.Admin(200, "GET", base, nil).JSON(t, &list)
		if len(list.Pipelines) != 2 || list.Pipelines[0].Name != "default" || list.Pipelines[0].Version != 2 || list.Pipelines[1].Name != "bug" {
			t.Fatalf("listing %+v", list)
		}
		// Versions, newest first, ending with the template.
		var vs struct{ Versions []pipelineBody }
		e.Admin(200, "GET", base+"/default/versions", nil).JSON(t, &vs)
		var got []int64
		for _, v := range vs.Versions {
			got = append(got, v.Version)
		}
		if fmt.Sprint(got) != "[2 1 0]" {
			t.Fatalf("versions %v", got)
		}
		var old pipelineBody
		e.Admin(200, "GET", base+"/default?version=1", nil).JSON(t, &old)
		if old.Version != 1 || len(old.Definition.Stages) != 2 {
			t.Fatalf("version 1: %+v", old)
		}
		e.Admin(200, "GET", base+"/default?version=0", nil).JSON(t, &old)
		if old.Version != 0 || len(old.Definition.Stages) != 4 {
			t.Fatalf("version 0 is the template: %+v", old)
		}
		e.Admin(404, "GET", base+"/default?version=9", nil)

		// Resolution for a ticket: its type's pipeline, else default.
		p, err := e.Core.Tenancy.FindProject(context.Background(), "ACME")
		if err != nil {
			t.Fatal(err)
		}
		for typ, want := range map[string]string{"bug": "bug", "task": "default", "docs": "default"} {
			pv, err := e.Core.Pipelines.Resolve(context.Background(), p, typ)
			if err != nil || pv.Name != want {
				t.Fatalf("ticket type %s resolves to %s (%v), want %s", typ, pv.Name, err, want)
			}
		}
		// One pipeline.published event per save.
		rows, _ := s.Query(context.Background(), `SELECT COUNT(*) FROM events WHERE type = 'pipeline.published'`)
		var n int64
		_ = rows.Scan(0, &n)
		if n != 3 {
			t.Fatalf("%d pipeline.published events for 3 saves", n)
		}
	})
}

func TestTemplateResolvesWithoutSaves(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		p, _ := e.Core.Tenancy.FindProject(context.Background(), "ACME")
		pv, err := e.Core.Pipelines.Resolve(context.Background(), p, "bug")
		if err != nil || pv.Name != "default" || pv.Version != 0 || len(pv.Definition.Stages) != 4 {
			t.Fatalf("resolution without saves: %+v %v", pv, err)
		}
	})
}

// TestConcurrentPublishExactlyOneWins: saves based on the same version race;
// the check is part of the write batch, so exactly one succeeds.
func TestConcurrentPublishExactlyOneWins(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		for round := range 3 {
			var wg sync.WaitGroup
			statuses := make([]int, 5)
			for i := range statuses {
				wg.Add(1)
				go func() {
					defer wg.Done()
					statuses[i] = e.Do(apitest.BootstrapToken, "PUT", "/api/v1/projects/ACME/pipelines/default",
						map[string]any{"version": round, "definition": minimalPipeline}).Status
				}()
			}
			wg.Wait()
			ok := 0
			for _, st := range statuses {
				if st == 200 {
					ok++
				} else if st != 409 {
					t.Fatalf("status %d", st)
				}
			}
			if ok != 1 {
				t.Fatalf("round %d: %d of 5 concurrent publishes on one base succeeded: %v", round, ok, statuses)
			}
		}
		var vs struct{ Versions []pipelineBody }
		e.Admin(200, "GET", "/api/v1/projects/ACME/pipelines/default/versions", nil).JSON(t, &vs)
		if len(vs.Versions) != 4 { // 3 saved + the template
			t.Fatalf("%d versions", len(vs.Versions))
		}
	})
}

// TestParseAndRender: parse and render read and store nothing, so one
// engine is enough.
func TestParseAndRender(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t, "sqlite")
	e := apitest.New(t, s)
	var parsed struct {
		Definition *pipeline.Definition
		Errors     []pipeline.Problem
	}
	tpl, _ := pipeline.Render(pipeline.Template())
	e.Admin(200, "POST", "/api/v1/pipelines/parse", map[string]any{"yaml": string(tpl)}).JSON(t, &parsed)
	if parsed.Definition == nil || len(parsed.Errors) != 0 || len(parsed.Definition.Stages) != 4 {
		t.Fatalf("template: %+v", parsed)
	}
	parsed.Definition, parsed.Errors = nil, nil
	e.Admin(200, "POST", "/api/v1/pipelines/parse", map[string]any{"yaml": "stages:\n  - id: a\n    kind: agent\n    colour: red\n    next: {done: nowhere}\n"}).JSON(t, &parsed)
	if len(parsed.Errors) != 2 || parsed.Errors[0].Line == 0 {
		t.Fatalf("problems: %+v", parsed.Errors)
	}
	codes := parsed.Errors[0].Code + "," + parsed.Errors[1].Code
	if !strings.Contains(codes, "unknown_field") || !strings.Contains(codes, "unknown_target") {
		t.Fatalf("codes %s", codes)
	}
	parsed.Definition = nil
	e.Admin(200, "POST", "/api/v1/pipelines/parse", map[string]any{"yaml": "stages: [\n"}).JSON(t, &parsed)
	if parsed.Definition != nil || parsed.Errors[0].Code != "yaml_syntax" {
		t.Fatalf("syntax error: %+v", parsed)
	}
	e.Admin(400, "POST", "/api/v1/pipelines/parse", map[string]any{"yml": "x"}) // unknown request field

	var rendered struct{ YAML string }
	e.Admin(200, "POST", "/api/v1/pipelines/render", map[string]any{"definition": pipeline.Template()}).JSON(t, &rendered)
	if rendered.YAML != string(tpl) {
		t.Fatalf("render differs from the canonical YAML:\n%s", rendered.YAML)
	}
	e.Admin(400, "POST", "/api/v1/pipelines/render", map[string]any{"definition": map[string]any{"stages": "nope"}})
	e.Admin(400, "POST", "/api/v1/pipelines/render", map[string]any{})
	e.Must(401, "", "POST", "/api/v1/pipelines/render", map[string]any{"definition": minimalPipeline})
}

type problemsBody struct {
	Error struct {
		Code    string
		Message string
		Details []pipeline.Problem
	}
}

// TestPublishYAML: PUT takes the pipeline as YAML instead of JSON (exactly
// one of the two); YAML problems come back as parse reports them, with
// their lines and columns.
func TestPublishYAML(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		const path = "/api/v1/projects/ACME/pipelines/default"
		good := "max_iterations: 2\nstages:\n  - id: implement\n    kind: agent\n  - id: approve\n    kind: human\n"
		var v1 pipelineBody
		e.Admin(200, "PUT", path, map[string]any{"version": 0, "yaml": good}).JSON(t, &v1)
		want, _ := pipeline.Parse([]byte(good))
		if v1.Version != 1 || !reflect.DeepEqual(v1.Definition, want) {
			t.Fatalf("published %+v", v1)
		}
		var got pipelineBody
		e.Admin(200, "GET", path, nil).JSON(t, &got)
		if got.Version != 1 || !reflect.DeepEqual(got.Definition, want) {
			t.Fatalf("read back %+v", got)
		}

		// Exactly one of definition and yaml.
		var bad struct {
			Error struct {
				Message string
				Details []apperr.FieldError
			}
		}
		e.Admin(400, "PUT", path, map[string]any{"version": 1}).JSON(t, &bad)
		if len(bad.Error.Details) != 1 || bad.Error.Details[0].Field != "definition" || !strings.Contains(bad.Error.Message, "yaml") {
			t.Fatalf("neither: %+v", bad)
		}
		e.Admin(400, "PUT", path, map[string]any{"version": 1, "yaml": good, "definition": minimalPipeline}).JSON(t, &bad)
		if len(bad.Error.Details) != 1 || bad.Error.Details[0].Field != "yaml" || !strings.Contains(bad.Error.Message, "definition") {
			t.Fatalf("both: %+v", bad)
		}
		e.Admin(400, "PUT", path, map[string]any{"version": 1, "yaml": 3}).JSON(t, &bad)
		if len(bad.Error.Details) != 1 || bad.Error.Details[0].Field != "yaml" {
			t.Fatalf("yaml not a string: %+v", bad)
		}

		// Problems: the same as parse reports, located in the YAML.
		for _, src := range []string{
			"max_iterations: 30\nstages:\n  - id: implement\n    kind: agnet\n    next: {done: reviw}\n",
			"stages: [\n",
			"",
			stagesYAML(pipeline.MaxStages + 1),
		} {
			var pb problemsBody
			e.Admin(400, "PUT", path, map[string]any{"version": 1, "yaml": src}).JSON(t, &pb)
			_, want := pipeline.Parse([]byte(src))
			if pb.Error.Code != "invalid" || !reflect.DeepEqual(pb.Error.Details, want) || !strings.HasPrefix(pb.Error.Message, "yaml: the pipeline has ") ||
				!strings.Contains(pb.Error.Message, want[0].String()) {
				t.Fatalf("%q:\n%+v\nwant details %+v", src, pb.Error, want)
			}
		}
		var pb problemsBody
		e.Admin(400, "PUT", path, map[string]any{"version": 1, "yaml": "max_iterations: 30\nstages:\n  - id: implement\n    kind: agnet\n"}).JSON(t, &pb)
		if pb.Error.Message != `yaml: the pipeline has 2 problems; the first: 1:17: max_iterations: max_iterations is 30; it must be between 1 and 20 [max_iterations_range]` ||
			pb.Error.Details[1].Line != 4 || pb.Error.Details[1].Column != 11 {
			t.Fatalf("problems %+v", pb.Error)
		}
		// Nothing was published meanwhile; a stale version is still a conflict.
		e.Admin(409, "PUT", path, map[string]any{"version": 0, "yaml": good})
		e.Admin(200, "PUT", path, map[string]any{"version": 1, "yaml": good})
	})
}

// stagesYAML is a valid pipeline of n agent stages.
func stagesYAML(n int) string {
	var b strings.Builder
	b.WriteString("stages:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {id: s%d, kind: agent}\n", i)
	}
	return b.String()
}

// TestPipelineInputLimits: the largest bodies the API takes, in the shapes
// that once took minutes (a list of scalars), answer with the limits that
// were hit; many problems are cut to the first MaxProblems. Such bodies
// are refused before anything is stored, so one engine is enough (saving
// pipelines runs on both in TestPipelinesREST).
func TestPipelineInputLimits(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t, "sqlite")
	e := apitest.New(t, s)
	e.Org("acme")
	e.Project("acme", "ACME")
	n := 400_000 // about 800 KiB, under the body limit
	scalarsYAML := "stages: [" + strings.TrimSuffix(strings.Repeat("1,", n), ",") + "]\n"
	scalarsJSON := json.RawMessage(`{"stages":[` + strings.TrimSuffix(strings.Repeat("1,", n), ",") + `]}`)

	var parsed struct {
		Definition *pipeline.Definition
		Errors     []pipeline.Problem
	}
	e.Admin(200, "POST", "/api/v1/pipelines/parse", map[string]any{"yaml": scalarsYAML}).JSON(t, &parsed)
	if len(parsed.Errors) != 1 || parsed.Errors[0].Code != pipeline.CodeTooManyStages || parsed.Errors[0].Line != 1 {
		t.Fatalf("parse: %+v", parsed.Errors)
	}
	for _, body := range []map[string]any{{"version": 0, "yaml": scalarsYAML}, {"version": 0, "definition": scalarsJSON}} {
		var pb problemsBody
		e.Admin(400, "PUT", "/api/v1/projects/ACME/pipelines/default", body).JSON(t, &pb)
		if len(pb.Error.Details) != 1 || pb.Error.Details[0].Code != pipeline.CodeTooManyStages {
			t.Fatalf("PUT: %+v", pb.Error)
		}
	}
	var pb problemsBody
	e.Admin(400, "POST", "/api/v1/pipelines/render", map[string]any{"definition": scalarsJSON}).JSON(t, &pb)
	if len(pb.Error.Details) != 1 || pb.Error.Details[0].Code != pipeline.CodeTooManyStages {
		t.Fatalf("render: %+v", pb.Error)
	}

	// 100 stages with two problems each: the first 100, then the count of
	// the rest; parse still returns the definition for the editor.
	var b strings.Builder
	b.WriteString("stages:\n")
	for i := range pipeline.MaxStages {
		fmt.Fprintf(&b, "  - {id: s%d, kind: robot, next: {done: nowhere}}\n", i)
	}
	parsed.Definition, parsed.Errors = nil, nil
	e.Admin(200, "POST", "/api/v1/pipelines/parse", map[string]any{"yaml": b.String()}).JSON(t, &parsed)
	last := parsed.Errors[len(parsed.Errors)-1]
	if len(parsed.Errors) != pipeline.MaxProblems+1 || last.Code != pipeline.CodeTooManyProblems || !strings.HasPrefix(last.Message, "and 100 more problems") ||
		parsed.Definition == nil || len(parsed.Definition.Stages) != pipeline.MaxStages {
		t.Fatalf("parse: %d problems, last %+v, definition %v", len(parsed.Errors), last, parsed.Definition != nil)
	}
	pb = problemsBody{}
	e.Admin(400, "PUT", "/api/v1/projects/ACME/pipelines/default", map[string]any{"version": 0, "yaml": b.String()}).JSON(t, &pb)
	if len(pb.Error.Details) != pipeline.MaxProblems+1 || !strings.HasPrefix(pb.Error.Message, "yaml: the pipeline has more than 100 problems; the first: 2:20: stages[0].kind:") {
		t.Fatalf("PUT: %d problems, %s", len(pb.Error.Details), pb.Error.Message)
	}
	// Over the body limit: 413.
	huge := strings.Repeat("#", 1<<20)
	if r := e.Do(apitest.BootstrapToken, "POST", "/api/v1/pipelines/parse", map[string]any{"yaml": huge}); r.Status != 413 {
		t.Fatalf("over the limit: %d %s", r.Status, r.Body)
	}
}
