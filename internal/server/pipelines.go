package server

import (
	"encoding/json"

	"github.com/ballet/ballet/internal/bounds"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/pipeline/versions"
)

// Pipelines serves named pipelines and their versions (spec pipelines.md
// "REST"), plus the parse and render helpers the editor uses.
type Pipelines struct {
	V *versions.Service
}

// PipelineSave is the body of PUT …/pipelines/{name}: the pipeline as JSON
// (definition) or as YAML (yaml), exactly one of the two.
type PipelineSave struct {
	Definition json.RawMessage `json:"definition,omitempty"`
	YAML       *string         `json:"yaml,omitempty"`
	Version    *int64          `json:"version"` // the version the edit was based on (0 for the first)
}

// draft reads the body: the version it is based on and the pipeline,
// parsed and validated (every problem with its line and column).
func (in PipelineSave) draft() (int64, pipeline.Definition, error) {
	var v apperr.Validator
	if in.Version == nil {
		v.Add("version", "is required: the version your edit is based on (0 for the first)")
	} else if *in.Version < 0 {
		v.Add("version", "must be 0 or more")
	}
	hasDef := len(in.Definition) > 0 && string(in.Definition) != "null"
	switch {
	case !hasDef && in.YAML == nil:
		v.Add("definition", "is required: the pipeline as JSON (or send it as YAML in yaml instead)")
	case hasDef && in.YAML != nil:
		v.Add("yaml", "cannot be sent together with definition: send the pipeline once, as JSON (definition) or as YAML (yaml)")
	}
	if err := v.Err(); err != nil {
		return 0, pipeline.Definition{}, err
	}
	var def pipeline.Definition
	var problems []pipeline.Problem
	field := "definition"
	if in.YAML != nil {
		field = "yaml"
		def, problems = pipeline.Parse([]byte(*in.YAML))
	} else {
		def, problems = pipeline.DecodeJSON(in.Definition)
	}
	if len(problems) > 0 {
		return 0, def, versions.Problems(field, problems)
	}
	return *in.Version, def, nil
}

// PipelineList is the body of GET …/pipelines.
type PipelineList struct {
	Pipelines []versions.PipelineVersion `json:"pipelines"`
}

// PipelineVersionList is the body of GET …/pipelines/{name}/versions.
type PipelineVersionList struct {
	Versions []versions.PipelineVersion `json:"versions"`
}

// ParseRequest is the body of POST /pipelines/parse.
type ParseRequest struct {
	YAML string `json:"yaml"`
}

// ParseResponse answers POST /pipelines/parse.
type ParseResponse struct {
	Definition *pipeline.Definition `json:"definition,omitempty"`
	Errors     []pipeline.Problem   `json:"errors"`
}

// RenderRequest is the body of POST /pipelines/render.
type RenderRequest struct {
	Definition json.RawMessage `json:"definition"`
}

// RenderResponse answers POST /pipelines/render.
type RenderResponse struct {
	YAML string `json:"yaml"`
}

// Routes returns the pipeline endpoints.
func (h *Pipelines) Routes() []*Route {
	return []*Route{
		{Method: "GET", Path: "/api/v1/projects/{project}/pipelines", Perm: access.TrackerRead,
			Summary:  "The latest version of each pipeline (the template shows as default version 0 until one is saved)",
			Response: PipelineList{}, Handle: h.list},
		{Method: "GET", Path: "/api/v1/projects/{project}/pipelines/{name}", Perm: access.TrackerRead,
			Summary: "A pipeline's latest version, or ?version=N", Response: versions.PipelineVersion{}, Handle: h.get},
		{Method: "GET", Path: "/api/v1/projects/{project}/pipelines/{name}/versions", Perm: access.TrackerRead,
			Summary: "A pipeline's versions, newest first", Response: PipelineVersionList{}, Handle: h.versions},
		{Method: "PUT", Path: "/api/v1/projects/{project}/pipelines/{name}", Perm: access.ProjectUpdate,
			Summary: "Publish a new version after the version read (0 for the first), from definition (JSON) or yaml, exactly one of them; 400 lists every problem (path, line, column); 409 when another was published meanwhile",
			Request: PipelineSave{}, Response: versions.PipelineVersion{}, Heavy: true, Handle: h.save},
		{Method: "POST", Path: "/api/v1/pipelines/parse", Perm: access.Authenticated,
			Summary: "Parse and validate pipeline YAML (unknown fields are errors)", Request: ParseRequest{}, Response: ParseResponse{}, Heavy: true, Handle: h.parse},
		{Method: "POST", Path: "/api/v1/pipelines/render", Perm: access.Authenticated,
			Summary: "Render a pipeline definition as canonical YAML", Request: RenderRequest{}, Response: RenderResponse{}, Heavy: true, Handle: h.render},
	}
}

func (h *Pipelines) list(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	ps, err := h.V.Latest(r.Context(), p)
	return PipelineList{Pipelines: ps}, err
}

func (h *Pipelines) get(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	version, err := r.QueryInt("version", -1, 0, bounds.Version.Max) // 0: the built-in default
	if err != nil {
		return nil, err
	}
	return h.V.Get(r.Context(), p, r.PathValue("name"), version)
}

func (h *Pipelines) versions(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	vs, err := h.V.Versions(r.Context(), p, r.PathValue("name"))
	return PipelineVersionList{Versions: vs}, err
}

func (h *Pipelines) save(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	var in PipelineSave
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	name := r.PathValue("name")
	if err := versions.CheckName(p, name); err != nil {
		return nil, err // the path is wrong whatever the body holds
	}
	base, def, err := in.draft()
	if err != nil {
		return nil, err
	}
	return h.V.Publish(r.Context(), r.Principal.Actor(), p, name, base, def)
}

func (h *Pipelines) parse(r *Request) (any, error) {
	r.Checked() // a pure function of the body
	var in ParseRequest
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	def, problems := pipeline.Parse([]byte(in.YAML))
	out := ParseResponse{Errors: problems}
	if out.Errors == nil {
		out.Errors = []pipeline.Problem{}
	}
	// The definition is returned whenever the YAML could be read, so that
	// the editor can show it next to its problems.
	if !fatal(problems) {
		if def.Stages == nil {
			def.Stages = []pipeline.Stage{} // "stages": [], never null
		}
		out.Definition = &def
	}
	return out, nil
}

// fatal reports problems that leave no usable definition (the one counting
// the problems left out concerns no value).
func fatal(ps []pipeline.Problem) bool {
	for _, p := range ps {
		if p.Path == "" && p.Code != pipeline.CodeTooManyProblems {
			return true
		}
	}
	return false
}

func (h *Pipelines) render(r *Request) (any, error) {
	r.Checked() // a pure function of the body
	var in RenderRequest
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	if len(in.Definition) == 0 || string(in.Definition) == "null" {
		return nil, apperr.Fields([]apperr.FieldError{{Field: "definition", Message: "is required"}})
	}
	def, problems := pipeline.DecodeJSON(in.Definition)
	for _, p := range problems {
		// What could not be read (unknown fields, wrong types, lists
		// beyond their limit) would be lost in the YAML; validation
		// problems do not stop rendering.
		if p.Lossy() {
			p.Line, p.Column = 0, 0 // the message names the path
			return nil, &apperr.Error{Code: apperr.Invalid, Message: "definition: " + p.String(), Details: problems}
		}
	}
	y, err := pipeline.Render(def)
	if err != nil {
		return nil, apperr.New(apperr.Invalid, "definition: %v", err)
	}
	return RenderResponse{YAML: string(y)}, nil
}
