package githubfake

// Protection is a branch protection rule of the fake (Protect): what
// GitHub's required status checks, required approving reviews and "dismiss
// stale pull request approvals when new commits are pushed" do to pull
// requests into the branch.
type Protection struct {
	Checks       []string // status contexts or check-run names that must have succeeded on the head
	Approvals    int      // approving reviews needed, by users with write access
	DismissStale bool     // a push to the head dismisses the approvals
}

// Protect protects branch: a pull request into it whose head lacks a
// required check's success or enough approvals reports mergeable_state
// "blocked", and a merge answers 405.
func (s *Server) Protect(owner, name, branch string, p Protection) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repo(owner, name)
	if r.protections == nil {
		r.protections = map[string]Protection{}
	}
	r.protections[branch] = p
}

// blocked reports whether the protection of p's base refuses to merge it
// now. Callers hold mu.
func (r *repo) blocked(p *pull) bool {
	rule, ok := r.protections[p.Base]
	if !ok {
		return false
	}
	for _, c := range rule.Checks {
		if !r.succeeded(p.HeadSHA, c) {
			return true
		}
	}
	latest := map[string]string{}
	for _, rv := range p.reviews {
		switch rv.AuthorAssociation {
		case "OWNER", "MEMBER", "COLLABORATOR":
		default:
			continue
		}
		switch rv.State {
		case "APPROVED", "CHANGES_REQUESTED", "DISMISSED":
			latest[rv.User] = rv.State
		}
	}
	approvals := 0
	for _, st := range latest {
		if st == "CHANGES_REQUESTED" {
			return true
		}
		if st == "APPROVED" {
			approvals++
		}
	}
	return approvals < rule.Approvals
}

// succeeded: check name's latest status or check run on sha succeeded.
func (r *repo) succeeded(sha, name string) bool {
	for _, st := range r.statuses[sha] {
		if st.Context == name {
			return st.State == "success"
		}
	}
	for _, c := range r.checkRuns[sha] {
		if c.Name == name {
			return c.Status == "completed" && (c.Conclusion == "success" || c.Conclusion == "neutral" || c.Conclusion == "skipped")
		}
	}
	return false
}

// dismissStale dismisses the approvals of p after a push to its head, when
// its base's protection says so. Callers hold mu.
func (r *repo) dismissStale(p *pull) {
	if !r.protections[p.Base].DismissStale {
		return
	}
	for _, rv := range p.reviews {
		if rv.State == "APPROVED" {
			rv.State = "DISMISSED"
		}
	}
}
