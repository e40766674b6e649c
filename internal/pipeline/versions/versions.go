// Package versions keeps the published versions of a project's pipelines
// (spec pipelines.md): every version immutable, the template as default
// version 0 until one is saved, and the resolution of the pipeline a ticket
// starts on. It owns the table pipeline_versions; the definitions
// themselves are the pure package pipeline's.
package versions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/clock"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/pipeline"
	"github.com/ballet/ballet/internal/store"
	"github.com/ballet/ballet/internal/tenancy"
	"github.com/ballet/ballet/internal/transition"
)

// Service reads and publishes pipeline versions.
//
// Every domain has a Service of its own over the store, the applier and
// the clock (one per domain, as STYLE.md's layout has it): what looks alike
// across domains' Service types is that layout, not shared logic.
type Service struct {
	Store   store.Store
	Applier *transition.Applier
	Clock   clock.Clock
}

// New returns a Service.
func New(s store.Store, a *transition.Applier, c clock.Clock) *Service {
	return &Service{Store: s, Applier: a, Clock: c}
}

// now is the current time at the precision times are stored with.
func (s *Service) now() time.Time { return s.Clock.Now().Truncate(time.Millisecond) }

// Events are the payload types of the events pipeline versions write.
var Events = []event.Payload{PipelinePublished{}}

func (PipelinePublished) EventType() string { return "pipeline.published" }

// PipelinePublished is the payload of pipeline.published.
type PipelinePublished struct {
	Name    string `json:"name"`
	Version int64  `json:"version"`
	BasedOn int64  `json:"based_on"` // the version it was edited from (0 for the first)
}

// TemplateAuthor is created_by of the template (version 0).
const TemplateAuthor = "ballet"

// PipelineVersion is one immutable version of a named pipeline.
type PipelineVersion struct {
	Project    string              `json:"project"` // the project's key
	Name       string              `json:"name"`
	Version    int64               `json:"version"`
	Definition pipeline.Definition `json:"definition"`
	CreatedBy  string              `json:"created_by"`
	CreatedAt  *time.Time          `json:"created_at,omitempty"` // absent for the template
}

func templateVersion(projectKey string) PipelineVersion {
	return PipelineVersion{Project: projectKey, Name: "default", Version: 0, Definition: pipeline.Template(), CreatedBy: TemplateAuthor}
}

// CheckName accepts "default" and the project's ticket types as the name
// of one of its pipelines.
func CheckName(p tenancy.Project, name string) error {
	if err := pipeline.ValidName(name); err != nil {
		return apperr.Fields([]apperr.FieldError{{Field: "name", Message: err.Error()}})
	}
	if name != "default" && !slices.Contains(p.TicketTypes, name) {
		return apperr.Fields([]apperr.FieldError{{Field: "name", Message: fmt.Sprintf("%q is not \"default\" or one of the project's ticket types %v", name, p.TicketTypes)}})
	}
	return nil
}

func scanPipeline(rows *store.Rows, i int, projectKey string) (PipelineVersion, error) {
	var v PipelineVersion
	var def string
	var at int64
	if err := rows.Scan(i, &v.Name, &v.Version, &def, &v.CreatedBy, &at); err != nil {
		return v, err
	}
	if err := json.Unmarshal([]byte(def), &v.Definition); err != nil {
		return v, fmt.Errorf("stored pipeline %s v%d: %w", v.Name, v.Version, err)
	}
	t := store.Time(at)
	v.Project, v.CreatedAt = projectKey, &t
	return v, nil
}

// scanPipelines reads every row of rows, versions of projectKey's
// pipelines.
func scanPipelines(rows *store.Rows, projectKey string) ([]PipelineVersion, error) {
	out := make([]PipelineVersion, rows.Len())
	for i := range out {
		var err error
		if out[i], err = scanPipeline(rows, i, projectKey); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Latest returns the newest version of each of the project's
// pipelines; the template shows as default version 0 until one is saved.
func (s *Service) Latest(ctx context.Context, p tenancy.Project) ([]PipelineVersion, error) {
	rows, err := s.Store.Query(ctx, `SELECT v.name, v.version, v.definition, v.created_by, v.created_at FROM pipeline_versions v
WHERE v.project_id = ? AND v.version = (SELECT MAX(version) FROM pipeline_versions w WHERE w.project_id = v.project_id AND w.name = v.name)
ORDER BY v.name = 'default' DESC, v.name`, p.ID)
	if err != nil {
		return nil, fmt.Errorf("read pipelines: %w", err)
	}
	out, err := scanPipelines(rows, p.Key)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 || out[0].Name != "default" {
		out = append([]PipelineVersion{templateVersion(p.Key)}, out...)
	}
	return out, nil
}

// Get returns a version of a named pipeline (version < 0: the
// latest). default resolves to the template (version 0) until saved.
func (s *Service) Get(ctx context.Context, p tenancy.Project, name string, version int64) (PipelineVersion, error) {
	if err := CheckName(p, name); err != nil {
		return PipelineVersion{}, err
	}
	q := `SELECT name, version, definition, created_by, created_at FROM pipeline_versions WHERE project_id = ? AND name = ? ORDER BY version DESC LIMIT 1`
	args := []any{p.ID, name}
	if version >= 0 {
		if version == 0 && name == "default" {
			return templateVersion(p.Key), nil
		}
		q = `SELECT name, version, definition, created_by, created_at FROM pipeline_versions WHERE project_id = ? AND name = ? AND version = ?`
		args = append(args, version)
	}
	rows, err := s.Store.Query(ctx, q, args...)
	if err != nil {
		return PipelineVersion{}, fmt.Errorf("read pipeline %s: %w", name, err)
	}
	if rows.Len() == 0 {
		if name == "default" && version < 0 {
			return templateVersion(p.Key), nil
		}
		if version >= 0 {
			return PipelineVersion{}, apperr.New(apperr.NotFound, "pipeline %s has no version %d", name, version)
		}
		return PipelineVersion{}, apperr.New(apperr.NotFound, "no pipeline named %s has been saved: tickets of that type use default", name)
	}
	return scanPipeline(rows, 0, p.Key)
}

// Versions lists a pipeline's versions, newest first (default
// ends with the template, version 0).
func (s *Service) Versions(ctx context.Context, p tenancy.Project, name string) ([]PipelineVersion, error) {
	if err := CheckName(p, name); err != nil {
		return nil, err
	}
	rows, err := s.Store.Query(ctx, `SELECT name, version, definition, created_by, created_at FROM pipeline_versions
WHERE project_id = ? AND name = ? ORDER BY version DESC`, p.ID, name)
	if err != nil {
		return nil, fmt.Errorf("read pipeline versions: %w", err)
	}
	out, err := scanPipelines(rows, p.Key)
	if err != nil {
		return nil, err
	}
	if name == "default" {
		out = append(out, templateVersion(p.Key))
	}
	return out, nil
}

// Publish publishes def as the version after base, the version the edit
// was based on (0 for the first). The check that no other version was
// saved meanwhile is part of the write batch: of two concurrent saves on
// the same base exactly one succeeds; the other gets a conflict.
func (s *Service) Publish(ctx context.Context, actor event.Actor, p tenancy.Project, name string, base int64, def pipeline.Definition) (PipelineVersion, error) {
	out, t, err := publish(actor, p, name, base, def, s.now())
	if err != nil {
		return PipelineVersion{}, err
	}
	if err := s.Applier.Apply(ctx, t); err != nil {
		if errors.Is(err, store.ErrLostRace) {
			return PipelineVersion{}, apperr.New(apperr.Conflict, "pipeline %s: version %d is not the latest: someone published meanwhile; reload and publish again", name, base)
		}
		return PipelineVersion{}, err
	}
	return out, nil
}

// publish decides the version of p's pipeline name after base holding def.
func publish(actor event.Actor, p tenancy.Project, name string, base int64, def pipeline.Definition, now time.Time) (PipelineVersion, *transition.Transition, error) {
	if err := CheckName(p, name); err != nil {
		return PipelineVersion{}, nil, err
	}
	if base < 0 {
		return PipelineVersion{}, nil, apperr.Fields([]apperr.FieldError{{Field: "version", Message: "must be 0 or more"}})
	}
	if ps := pipeline.Validate(def); len(ps) > 0 {
		return PipelineVersion{}, nil, Problems("definition", ps)
	}
	stored, err := json.Marshal(def)
	if err != nil {
		return PipelineVersion{}, nil, fmt.Errorf("encode pipeline: %w", err)
	}
	out := PipelineVersion{Project: p.Key, Name: name, Version: base + 1, Definition: def, CreatedBy: actor.Sub, CreatedAt: &now}
	payload := PipelinePublished{Name: name, Version: base + 1, BasedOn: base}
	return out, &transition.Transition{
		Events: []event.Event{event.Of(actor, p.OrganizationID, p.ID, p.ID+":"+name, payload)},
		Guarded: []store.Statement{store.Stmt(`INSERT INTO pipeline_versions (project_id, name, version, definition, created_by, created_at)
SELECT ?, ?, ?, ?, ?, ? WHERE (SELECT COALESCE(MAX(version), 0) FROM pipeline_versions WHERE project_id = ? AND name = ?) = ?`,
			p.ID, name, base+1, string(stored), actor.Sub, now.UnixMilli(), p.ID, name, base)},
	}, nil
}

// Problems is the error of a definition (sent in field) with problems:
// every problem (with its line and column) in the details, the first in
// the message.
func Problems(field string, ps []pipeline.Problem) error {
	n := fmt.Sprintf("%d problem", len(ps))
	if len(ps) > 1 {
		n += "s"
	}
	if ps[len(ps)-1].Code == pipeline.CodeTooManyProblems {
		n = fmt.Sprintf("more than %d problems", pipeline.MaxProblems)
	}
	return &apperr.Error{Code: apperr.Invalid, Message: fmt.Sprintf("%s: the pipeline has %s; the first: %s", field, n, ps[0]), Details: ps}
}

// Resolve picks the pipeline a ticket of the given type starts on:
// its type's latest version, else default's, else the template (version 0).
func (s *Service) Resolve(ctx context.Context, p tenancy.Project, ticketType string) (PipelineVersion, error) {
	for _, name := range []string{ticketType, "default"} {
		if name == "" || (name != "default" && !slices.Contains(p.TicketTypes, name)) {
			continue
		}
		rows, err := s.Store.Query(ctx, `SELECT name, version, definition, created_by, created_at FROM pipeline_versions
WHERE project_id = ? AND name = ? ORDER BY version DESC LIMIT 1`, p.ID, name)
		if err != nil {
			return PipelineVersion{}, fmt.Errorf("resolve pipeline: %w", err)
		}
		if rows.Len() > 0 {
			return scanPipeline(rows, 0, p.Key)
		}
	}
	return templateVersion(p.Key), nil
}
