package apitest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/ballet/internal/apitest"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/store/storetest"
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
		p, err := e.Core.Tracker.FindProject(context.Background(), "ACME")
		if err != nil {
			t.Fatal(err)
		}
		for typ, want := range map[string]string{"bug": "bug", "task": "default", "docs": "default"} {
			pv, err := e.Core.Tracker.ResolvePipeline(context.Background(), p, typ)
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
	storetest.Each(t, func(t *testing.T, s store.Store) {
		e := apitest.New(t, s)
		e.Org("acme")
		e.Project("acme", "ACME")
		p, _ := e.Core.Tracker.FindProject(context.Background(), "ACME")
		pv, err := e.Core.Tracker.ResolvePipeline(context.Background(), p, "bug")
		if err != nil || pv.Name != "default" || pv.Version != 0 || len(pv.Definition.Stages) != 4 {
			t.Fatalf("resolution without saves: %+v %v", pv, err)
		}
	})
}

// TestConcurrentPublishExactlyOneWins: saves based on the same version race;
// the check is part of the write batch, so exactly one succeeds.
func TestConcurrentPublishExactlyOneWins(t *testing.T) {
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

func TestParseAndRender(t *testing.T) {
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
