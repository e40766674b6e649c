package githubfake

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

type pull struct {
	Number         int
	Title, Body    string
	Head, Base     string // branch names
	HeadSHA        string // the head when it was last pushed (kept after deletion)
	State          string // open or closed
	Merged         bool
	MergedSHA      string // the head commit that was merged
	MergeCommitSHA string
	Merges         int // successful merge calls: more than 1 is a double merge
	Conflict       bool
	MergeableState string // "" = computed: clean or dirty
	nullLeft       int
	Created        time.Time
	MergedAt       time.Time
	ClosedAt       time.Time
	User           string
	reviews        []*Review
}

func (s *Server) listPulls(w http.ResponseWriter, req *http.Request, r *repo, p *pull) {
	q := req.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	if state != "open" && state != "closed" && state != "all" {
		writeValidation(w, map[string]any{"resource": "PullRequest", "field": "state", "code": "invalid"})
		return
	}
	var out []map[string]any
	for i := len(r.pulls) - 1; i >= 0; i-- { // newest first
		p := r.pulls[i]
		if (state != "all" && p.State != state) ||
			(q.Get("base") != "" && p.Base != q.Get("base")) ||
			(q.Get("head") != "" && q.Get("head") != r.owner+":"+p.Head) {
			continue
		}
		out = append(out, s.pullJSON(r, p, false))
	}
	writePage(w, req, out)
}

func (s *Server) createPull(w http.ResponseWriter, req *http.Request, r *repo, p *pull) {
	var in struct {
		Title, Head, Base, Body string
	}
	if !decode(w, req, &in) {
		return
	}
	head := in.Head
	if o, b, found := strings.Cut(in.Head, ":"); found {
		if o != r.owner {
			writeValidation(w, map[string]any{"resource": "PullRequest", "field": "head", "code": "invalid"})
			return
		}
		head = b
	}
	switch {
	case in.Title == "":
		writeValidation(w, map[string]any{"resource": "PullRequest", "field": "title", "code": "missing_field"})
		return
	case r.branches[in.Base] == "":
		writeValidation(w, map[string]any{"resource": "PullRequest", "field": "base", "code": "invalid"})
		return
	case r.branches[head] == "":
		writeValidation(w, map[string]any{"resource": "PullRequest", "field": "head", "code": "invalid"})
		return
	}
	for _, o := range r.pulls {
		if o.State == "open" && o.Head == head && o.Base == in.Base {
			writeValidation(w, map[string]any{"resource": "PullRequest", "code": "custom",
				"message": fmt.Sprintf("A pull request already exists for %s:%s.", r.owner, head)})
			return
		}
	}
	if r.branches[head] == r.branches[in.Base] {
		writeValidation(w, map[string]any{"resource": "PullRequest", "code": "custom",
			"message": fmt.Sprintf("No commits between %s and %s", in.Base, head)})
		return
	}
	writeJSON(w, http.StatusCreated, s.pullJSON(r, s.open(r, head, in.Base, r.branches[head], in.Title, in.Body, "ballet"), true))
}

func (s *Server) getPull(w http.ResponseWriter, req *http.Request, r *repo, p *pull) {
	writeJSON(w, http.StatusOK, s.pullJSON(r, p, true))
	if p.nullLeft > 0 {
		p.nullLeft--
	}
}

func (s *Server) editPull(w http.ResponseWriter, req *http.Request, r *repo, p *pull) {
	var in struct {
		State *string `json:"state"`
	}
	if !decode(w, req, &in) {
		return
	}
	if in.State != nil {
		switch {
		case *in.State != "open" && *in.State != "closed":
			writeValidation(w, map[string]any{"resource": "PullRequest", "field": "state", "code": "invalid"})
			return
		case p.Merged && *in.State != "closed":
			writeValidation(w, map[string]any{"resource": "PullRequest", "code": "custom", "message": "Cannot reopen a merged pull request"})
			return
		case p.Merged:
			writeValidation(w, map[string]any{"resource": "PullRequest", "code": "custom", "message": "Cannot close a merged pull request"})
			return
		case *in.State == "closed" && p.State == "open":
			p.State, p.ClosedAt = "closed", s.clock.Now()
		case *in.State == "open" && p.State == "closed":
			p.State, p.ClosedAt = "open", time.Time{}
			p.nullLeft = s.nullReads
		}
	}
	writeJSON(w, http.StatusOK, s.pullJSON(r, p, true))
}

func (s *Server) pullJSON(r *repo, p *pull, full bool) map[string]any {
	ts := func(t time.Time) any {
		if t.IsZero() {
			return nil
		}
		return t.UTC().Format(time.RFC3339)
	}
	m := map[string]any{
		"number":     p.Number,
		"url":        fmt.Sprintf("%srepos/%s/%s/pulls/%d", s.URL, r.owner, r.name, p.Number),
		"html_url":   fmt.Sprintf("https://github.example/%s/%s/pull/%d", r.owner, r.name, p.Number),
		"state":      p.State,
		"title":      p.Title,
		"body":       p.Body,
		"user":       map[string]any{"login": p.User},
		"created_at": ts(p.Created),
		"closed_at":  ts(p.ClosedAt),
		"merged_at":  ts(p.MergedAt),
		"head": map[string]any{"ref": p.Head, "sha": p.HeadSHA, "label": r.owner + ":" + p.Head,
			"repo": map[string]any{"name": r.name, "full_name": r.owner + "/" + r.name}},
		"base": map[string]any{"ref": p.Base, "sha": r.branches[p.Base], "label": r.owner + ":" + p.Base,
			"repo": map[string]any{"name": r.name, "full_name": r.owner + "/" + r.name}},
		"draft": false,
	}
	if p.Merged {
		m["merge_commit_sha"] = p.MergeCommitSHA
	}
	if !full {
		return m // a list item has no merged or mergeable fields
	}
	m["merged"] = p.Merged
	switch {
	case p.Merged || p.State != "open":
		m["mergeable"], m["mergeable_state"] = nil, "unknown"
	case p.nullLeft > 0:
		m["mergeable"], m["mergeable_state"] = nil, "unknown"
	case p.Conflict:
		m["mergeable"], m["mergeable_state"] = false, "dirty"
	default:
		st := p.MergeableState
		if st == "" && r.blocked(p) {
			st = "blocked"
		}
		if st == "" {
			st = "clean"
		}
		m["mergeable"], m["mergeable_state"] = true, st
	}
	return m
}

// OpenPullRequest opens a pull request as a person would, and returns its
// number. It panics when the branches do not exist: a test's mistake.
func (s *Server) OpenPullRequest(owner, name, head, base, title, body string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repo(owner, name)
	sha, ok := r.branches[head]
	if _, okBase := r.branches[base]; !ok || !okBase {
		panic(fmt.Sprintf("githubfake: OpenPullRequest: %s or %s is not a branch of %s/%s", head, base, owner, name))
	}
	return s.open(r, head, base, sha, title, body, "a-person").Number
}

func (s *Server) open(r *repo, head, base, sha, title, body, user string) *pull {
	p := &pull{
		Number: len(r.pulls) + 1, Title: title, Body: body, Head: head, Base: base, HeadSHA: sha,
		State: "open", nullLeft: s.nullReads, Created: s.clock.Now(), User: user,
	}
	r.pulls = append(r.pulls, p)
	return p
}

// ClosePullRequest closes pull request n without merging.
func (s *Server) ClosePullRequest(owner, name string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pull(s.repo(owner, name), n)
	p.State, p.ClosedAt = "closed", s.clock.Now()
}

// SetConflict makes pull request n conflict with its base (mergeable
// false, mergeable_state dirty) or not.
func (s *Server) SetConflict(owner, name string, n int, conflict bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pull(s.repo(owner, name), n).Conflict = conflict
}

// SetMergeableState sets the mergeable_state pull request n reports once
// computed (blocked, behind, unstable, has_hooks…); "" reports clean or
// dirty. blocked and behind make a merge answer 405, as branch protection
// does.
func (s *Server) SetMergeableState(owner, name string, n int, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pull(s.repo(owner, name), n).MergeableState = state
}

// PullRequest is a pull request as the fake holds it, for assertions.
type PullRequest struct {
	Number         int
	Title, Body    string
	Head, Base     string
	HeadSHA        string
	Open, Merged   bool
	MergedSHA      string // the head commit that was merged
	Merges         int    // successful merges: more than 1 is a double merge
	MergeCommitSHA string
}

// PullRequests returns owner/name's pull requests, by number.
func (s *Server) PullRequests(owner, name string) []PullRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []PullRequest
	for _, p := range s.repo(owner, name).pulls {
		out = append(out, PullRequest{
			Number: p.Number, Title: p.Title, Body: p.Body, Head: p.Head, Base: p.Base, HeadSHA: p.HeadSHA,
			Open: p.State == "open", Merged: p.Merged, MergedSHA: p.MergedSHA, Merges: p.Merges, MergeCommitSHA: p.MergeCommitSHA,
		})
	}
	return out
}

// pull panics on a test's mistake (an unknown pull request given to a test
// method); callers hold mu.
func (s *Server) pull(r *repo, n int) *pull {
	if n < 1 || n > len(r.pulls) {
		panic(fmt.Sprintf("githubfake: %s/%s has no pull request %d", r.owner, r.name, n))
	}
	return r.pulls[n-1]
}
