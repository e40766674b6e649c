package server

import (
	"net/http"

	"github.com/ballet/ballet/internal/bounds"

	"github.com/ballet/ballet/internal/access"
	"github.com/ballet/ballet/internal/skill"
)

// Skills serves a project's skills.
type Skills struct {
	S *skill.Service
}

// SkillCreate is the body of POST /projects/{project}/skills.
type SkillCreate struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Content     string `json:"content"`
}

// SkillUpdate is the body of PUT …/skills/{name}: version is the one read;
// absent fields stay.
type SkillUpdate struct {
	Version     int64   `json:"version"`
	Description *string `json:"description,omitempty"`
	Content     *string `json:"content,omitempty"`
}

// SkillList is the body of GET …/skills.
type SkillList struct {
	Skills []skill.Skill `json:"skills"`
}

// SkillVersionList is the body of GET …/skills/{name}/versions.
type SkillVersionList struct {
	Versions []skill.SkillVersion `json:"versions"`
}

// Routes returns the skill endpoints.
func (h *Skills) Routes() []*Route {
	const base = "/api/v1/projects/{project}/skills"
	return []*Route{
		{Method: "GET", Path: base, Perm: access.TrackerRead, Summary: "List a project's skills",
			Response: SkillList{}, Handle: h.list},
		{Method: "POST", Path: base, Perm: access.ProjectUpdate, Summary: "Create a skill (project admins)",
			Request: SkillCreate{}, Response: skill.Skill{}, Status: http.StatusCreated, Handle: h.create},
		{Method: "GET", Path: base + "/{name}", Perm: access.TrackerRead, Summary: "Get a skill (?version=N for an older version)",
			Response: skill.Skill{}, Handle: h.get},
		{Method: "GET", Path: base + "/{name}/versions", Perm: access.TrackerRead, Summary: "List a skill's versions, newest first",
			Response: SkillVersionList{}, Handle: h.versions},
		{Method: "PUT", Path: base + "/{name}", Perm: access.ProjectUpdate, Summary: "Write a new version of a skill (optimistic: send the version read)",
			Request: SkillUpdate{}, Response: skill.Skill{}, Handle: h.update},
		{Method: "DELETE", Path: base + "/{name}", Perm: access.ProjectUpdate, Summary: "Delete a skill (its versions are kept; the name becomes free)",
			Status: http.StatusNoContent, Handle: h.remove},
	}
}

func (h *Skills) list(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	ks, err := h.S.List(r.Context(), p.ID)
	return SkillList{Skills: ks}, err
}

func (h *Skills) create(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	var in SkillCreate
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.S.Create(r.Context(), r.Principal.Actor(), p, skill.Input(in))
}

func (h *Skills) get(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	n, err := r.QueryInt("version", 0, bounds.Version.Min, bounds.Version.Max)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return h.S.Find(r.Context(), p.ID, r.PathValue("name"))
	}
	return h.S.FindVersion(r.Context(), p.ID, r.PathValue("name"), n)
}

func (h *Skills) versions(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	vs, err := h.S.Versions(r.Context(), p.ID, r.PathValue("name"))
	return SkillVersionList{Versions: vs}, err
}

func (h *Skills) update(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	var in SkillUpdate
	if err := r.Decode(&in); err != nil {
		return nil, err
	}
	return h.S.Update(r.Context(), r.Principal.Actor(), p, r.PathValue("name"), in.Version, skill.Patch{Description: in.Description, Content: in.Content})
}

func (h *Skills) remove(r *Request) (any, error) {
	p, err := r.Project()
	if err != nil {
		return nil, err
	}
	return nil, h.S.Delete(r.Context(), r.Principal.Actor(), p, r.PathValue("name"))
}
