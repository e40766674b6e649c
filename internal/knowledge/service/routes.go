package service

import (
	"net/http"

	"github.com/ballet/ballet/internal/apperr"
	"github.com/ballet/ballet/internal/bounds"
	"github.com/ballet/ballet/internal/event"
	"github.com/ballet/ballet/internal/knowledge"
)

// Request bodies.
type (
	// SpaceCreate creates a space.
	SpaceCreate struct {
		Slug        string `json:"slug"`
		Title       string `json:"title,omitempty"`
		Description string `json:"description,omitempty"`
	}
	// EntryCreate creates an entry.
	EntryCreate struct {
		Slug  string   `json:"slug"`
		Title string   `json:"title"`
		Body  string   `json:"body"`
		Tags  []string `json:"tags,omitempty"`
		Note  string   `json:"note,omitempty"`
	}
	// EntrySave saves a new version of an entry, based on the version the
	// caller read (required: a stale one is a 409).
	EntrySave struct {
		Version *int64   `json:"version"`
		Title   string   `json:"title"`
		Body    string   `json:"body"`
		Tags    []string `json:"tags,omitempty"`
		Note    string   `json:"note,omitempty"`
	}
	// EntryRestore restores an old version as a new one.
	EntryRestore struct {
		Version *int64 `json:"version"`
		BasedOn *int64 `json:"based_on"`
	}
)

// Response bodies.
type (
	// SpaceList lists spaces.
	SpaceList struct {
		Spaces []knowledge.Space `json:"spaces"`
	}
	// EntryList lists entries.
	EntryList struct {
		Entries []knowledge.Entry `json:"entries"`
	}
	// VersionList lists versions, newest first.
	VersionList struct {
		Versions []knowledge.Version `json:"versions"`
	}
	// DiffResult is a diff between two versions.
	DiffResult struct {
		From int64  `json:"from"`
		To   int64  `json:"to"`
		Diff string `json:"diff"`
	}
	// SearchResult is a search's answer, best first.
	SearchResult struct {
		Results []knowledge.Hit `json:"results"`
	}
	// History is an entry's events, oldest first.
	History struct {
		Events []event.Event `json:"events"`
	}
)

// version checks a version a body must carry: present and within
// bounds.Version.
func version(field string, v *int64) error {
	switch {
	case v == nil:
		return apperr.Fields([]apperr.FieldError{{Field: field, Message: "is required"}})
	}
	return bounds.Version.Err(field, *v)
}

func (a *API) table() []*Route {
	k := a.K
	entry := "/spaces/{space}/entries/{slug}"
	return []*Route{
		{Method: "GET", Path: "/spaces", Perm: Read, Summary: "List the organization's spaces (default among them)", Response: SpaceList{},
			Handle: func(r *Request) (any, error) {
				sp, err := k.Spaces(r.Context(), r.Org)
				return SpaceList{Spaces: sp}, err
			}},
		{Method: "POST", Path: "/spaces", Perm: Manage, Summary: "Create a space", Request: SpaceCreate{}, Response: knowledge.Space{}, Status: http.StatusCreated,
			Handle: func(r *Request) (any, error) {
				var in SpaceCreate
				if err := r.Decode(&in); err != nil {
					return nil, err
				}
				return k.CreateSpace(r.Context(), r.Actor(), r.Org, knowledge.SpaceInput(in))
			}},
		{Method: "GET", Path: "/spaces/{space}", Perm: Read, Summary: "Read a space", Response: knowledge.Space{},
			Handle: func(r *Request) (any, error) { return k.Space(r.Context(), r.Org, r.PathValue("space")) }},
		{Method: "GET", Path: "/spaces/{space}/entries", Perm: Read, Summary: "List a space's entries by slug",
			Query: []QueryParam{{Name: "tag", Type: "string", Description: "only entries with this tag"},
				{Name: "include_deleted", Type: "boolean", Description: "deleted entries too"},
				{Name: "after", Type: "string", Description: "entries after this slug (paging)"},
				{Name: "limit", Type: "integer", Description: "at most this many (100; 1 … 1000)"}},
			Response: EntryList{},
			Handle: func(r *Request) (any, error) {
				limit, err := r.QueryInt("limit", 100, bounds.Limit.Min, bounds.Limit.Max)
				if err != nil {
					return nil, err
				}
				del, err := r.QueryBool("include_deleted")
				if err != nil {
					return nil, err
				}
				q := r.URL.Query()
				es, err := k.Entries(r.Context(), r.Org, r.PathValue("space"), knowledge.ListOptions{
					Tag: q.Get("tag"), IncludeDeleted: del, After: q.Get("after"), Limit: int(limit)})
				return EntryList{Entries: es}, err
			}},
		{Method: "POST", Path: "/spaces/{space}/entries", Perm: Write, Summary: "Create an entry (version 1)", Request: EntryCreate{},
			Response: knowledge.Entry{}, Status: http.StatusCreated,
			Handle: func(r *Request) (any, error) {
				var in EntryCreate
				if err := r.Decode(&in); err != nil {
					return nil, err
				}
				return k.CreateEntry(r.Context(), r.Actor(), r.Org, r.PathValue("space"), knowledge.EntryInput{Slug: in.Slug,
					Content: knowledge.Content{Title: in.Title, Body: in.Body, Tags: in.Tags, Note: in.Note}})
			}},
		{Method: "GET", Path: entry, Perm: Read, Summary: "Read an entry (its current version, or ?version=N); the slug's slashes are sent as %2F",
			Query:    []QueryParam{{Name: "version", Type: "integer", Description: "an older version"}},
			Response: knowledge.Entry{},
			Handle: func(r *Request) (any, error) {
				n, err := r.QueryInt("version", 0, bounds.Version.Min, bounds.Version.Max)
				if err != nil {
					return nil, err
				}
				if n == 0 {
					return k.Entry(r.Context(), r.Org, r.PathValue("space"), pathSlug(r))
				}
				return k.EntryAt(r.Context(), r.Org, r.PathValue("space"), pathSlug(r), n)
			}},
		{Method: "PUT", Path: entry, Perm: Write, Summary: "Save a new version, based on the version read (409 when stale)", Request: EntrySave{},
			Response: knowledge.Entry{},
			Handle: func(r *Request) (any, error) {
				var in EntrySave
				if err := r.Decode(&in); err != nil {
					return nil, err
				}
				if err := version("version", in.Version); err != nil {
					return nil, err
				}
				return k.Save(r.Context(), r.Actor(), r.Org, r.PathValue("space"), pathSlug(r), *in.Version,
					knowledge.Content{Title: in.Title, Body: in.Body, Tags: in.Tags, Note: in.Note})
			}},
		{Method: "DELETE", Path: entry, Perm: Write, Summary: "Delete an entry (softly: undelete brings it back)", Response: knowledge.Entry{},
			Handle: func(r *Request) (any, error) {
				return k.SetDeleted(r.Context(), r.Actor(), r.Org, r.PathValue("space"), pathSlug(r), true)
			}},
		{Method: "POST", Path: entry + "/undelete", Perm: Write, Summary: "Undelete an entry", Response: knowledge.Entry{},
			Handle: func(r *Request) (any, error) {
				return k.SetDeleted(r.Context(), r.Actor(), r.Org, r.PathValue("space"), pathSlug(r), false)
			}},
		{Method: "GET", Path: entry + "/versions", Perm: Read, Summary: "An entry's versions, newest first", Response: VersionList{},
			Handle: func(r *Request) (any, error) {
				vs, err := k.Versions(r.Context(), r.Org, r.PathValue("space"), pathSlug(r))
				return VersionList{Versions: vs}, err
			}},
		{Method: "GET", Path: entry + "/diff", Perm: Read, Summary: "The unified diff between two versions",
			Query: []QueryParam{{Name: "from", Type: "integer", Description: "the older version (required)"},
				{Name: "to", Type: "integer", Description: "the newer version (required)"}},
			Response: DiffResult{},
			Handle: func(r *Request) (any, error) {
				from, err := r.QueryInt("from", 0, bounds.Version.Min, bounds.Version.Max)
				if err != nil {
					return nil, err
				}
				to, err := r.QueryInt("to", 0, bounds.Version.Min, bounds.Version.Max)
				if err != nil {
					return nil, err
				}
				if from == 0 || to == 0 {
					return nil, apperr.Fields([]apperr.FieldError{{Field: "from", Message: "from and to are both required"}})
				}
				d, err := k.Diff(r.Context(), r.Org, r.PathValue("space"), pathSlug(r), from, to)
				return DiffResult{From: from, To: to, Diff: d}, err
			}},
		{Method: "POST", Path: entry + "/restore", Perm: Write, Summary: "Restore an old version as a new one", Request: EntryRestore{},
			Response: knowledge.Entry{},
			Handle: func(r *Request) (any, error) {
				var in EntryRestore
				if err := r.Decode(&in); err != nil {
					return nil, err
				}
				if err := version("version", in.Version); err != nil {
					return nil, err
				}
				if err := version("based_on", in.BasedOn); err != nil {
					return nil, err
				}
				return k.Restore(r.Context(), r.Actor(), r.Org, r.PathValue("space"), pathSlug(r), *in.Version, *in.BasedOn)
			}},
		{Method: "GET", Path: entry + "/history", Perm: Read, Summary: "An entry's events (its history), oldest first", Response: History{},
			Handle: func(r *Request) (any, error) {
				es, err := k.History(r.Context(), r.Org, r.PathValue("space"), pathSlug(r))
				return History{Events: es}, err
			}},
		{Method: "GET", Path: "/search", Perm: Read, Summary: "Search the current versions of the organization's entries",
			Query: []QueryParam{{Name: "q", Type: "string", Description: "words, all required"},
				{Name: "space", Type: "string", Description: "only this space"},
				{Name: "tag", Type: "string", Description: "only entries with this tag (repeatable: all of them)", Repeat: true},
				{Name: "include_deleted", Type: "boolean", Description: "deleted entries too"},
				{Name: "limit", Type: "integer", Description: "at most this many (20; 1 … 100)"}},
			Response: SearchResult{},
			Handle: func(r *Request) (any, error) {
				limit, err := r.QueryInt("limit", 20, 1, knowledge.MaxResults)
				if err != nil {
					return nil, err
				}
				del, err := r.QueryBool("include_deleted")
				if err != nil {
					return nil, err
				}
				q := r.URL.Query()
				hits, err := k.Search(r.Context(), r.Org, knowledge.Query{Text: q.Get("q"), Space: q.Get("space"),
					Tags: q["tag"], IncludeDeleted: del, Limit: int(limit)})
				return SearchResult{Results: hits}, err
			}},
	}
}
